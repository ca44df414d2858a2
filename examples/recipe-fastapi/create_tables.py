import asyncio

from app import Base, Signup, engine


async def main() -> None:
    async with engine.begin() as connection:
        # The jobs table is `sa-jobqueue migrate`'s; create only the app's own here.
        await connection.run_sync(Base.metadata.create_all, tables=[Signup.__table__])
    await engine.dispose()


asyncio.run(main())
