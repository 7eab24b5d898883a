"""``python -m dlog``: the same as the ``dlog`` console script."""

from dlog import main

if __name__ == "__main__":
    main()
