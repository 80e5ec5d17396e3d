"""``python -m gradtrace`` is the ``gradtrace`` command."""

import sys

from gradtrace.cli import main

sys.exit(main())
