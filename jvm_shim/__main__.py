"""``python -m jvm_shim --uri URI [--port P] [--address 127.0.0.1] [--parent-watch]``: the gateway process
(see :func:`jvm_shim.process.run`)."""

import sys

from jvm_shim.process import main

if __name__ == "__main__":
    sys.exit(main())
