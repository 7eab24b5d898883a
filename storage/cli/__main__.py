"""``python -m storage.cli``: the same as the ``dlog`` console script."""

from storage.cli import main

if __name__ == "__main__":
    main()
