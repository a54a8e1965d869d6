"""One module per archive migration, oldest first (Alembic revision files; see ``storage/README.md``)."""
