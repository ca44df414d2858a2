import asyncio

from app import Base, engine


async def main() -> None:
    async with engine.begin() as connection:
        # The jobs table is `sa-jobqueue migrate`'s; create only the app's own here.
        signups = Base.metadata.tables["signups"]
        await connection.run_sync(Base.metadata.create_all, tables=[signups])
    await engine.dispose()


asyncio.run(main())
