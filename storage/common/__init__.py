"""What every layer of the storage core uses: futures and outstanding-write limits (:mod:`storage.common.futures`) and
the Prometheus metrics (:mod:`storage.common.stats`)."""
