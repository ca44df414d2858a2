from models import Base, Invoice, Order, engine

# Only your own tables: the jobs table is the migration's (it also installs the trigger
# that wakes idle workers and records the revision for later upgrades).
Base.metadata.create_all(engine, tables=[Order.__table__, Invoice.__table__])
print("created orders and invoices")
