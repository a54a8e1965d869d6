"""``python -m coevo.storage.migrations "add the foo table"``: write the next migration
(``coevo.storage.migrate.new_revision``; see ``storage/README.md``)."""

import sys

from coevo.storage.migrate import new_revision

if len(sys.argv) != 2:
    sys.exit('usage: python -m coevo.storage.migrations "add the foo table"')
print(new_revision(sys.argv[1]))
