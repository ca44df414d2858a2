from models import Base, engine

# Only your own tables: the jobs table is the migration's (it records the revision for
# later upgrades and, on PostgreSQL, installs the trigger that wakes idle workers).
tables = Base.metadata.tables  # by name: typed as Table, which create_all takes
Base.metadata.create_all(engine, tables=[tables["orders"], tables["invoices"]])
print("created orders and invoices")
