"""``dlog``: the operations command-line tool, after Apache DistributedLog's ``dlog tool``.

::

    dlog [--uri URI] [--conf FILE] [-v] COMMAND [ARGS]...

Commands: ``bind``, ``list``, ``create``, ``delete``, ``show``, ``count``, ``dump``, ``tail``, ``write``,
``truncate``, ``seal``, ``subscribers``, ``lag``, ``purge``, ``stats``, ``offload``, ``restore``, ``proxy``,
``proxy-status``, ``dlsn encode`` / ``dlsn decode``, ``bench`` and ``gateway``; ``--help`` on each.

Output conventions (stable, for scripts and ``grep``):

* results go to stdout as plain text, one fact per line; ``show`` uses DistributedLog's field names
  (``firstTxId``, ``lastDLSN``, ``endOfStreamMarked``, ...), ``count`` prints ``total is N records.``,
  ``dump``/``tail`` print ``Record (txn = .., bytes = .., dlsn = .., sequence id = ..)`` then the payload;
* DLSNs are printed and parsed in the text form ``lssn,entry,slot``;
* payloads are printed as UTF-8 (undecodable bytes replaced by U+FFFD) or as hex with ``--hex``;
* progress bars go to stderr, only when stderr is a terminal (and, for commands that print records, only
  when stdout is not: the records scrolling by are progress enough).

Exit codes: 0 success; 1 an error, reported as one line ``dlog: error: <message>`` on stderr (every
:class:`storage.errors.DLError` and every operational failure); 2 a usage error (unknown option, bad DLSN or
number, missing ``--uri``), also one line; 130 interrupted (``tail`` exits 0 on SIGINT/SIGTERM: following until
told to stop is its normal end).

Layout of the package (each module one concern; only ``_common`` is shared):

* ``_common``: output helpers, the DLSN parameter type, :class:`State` (``--uri``/``--conf``) and
  ``pass_state``, log look-ups, exit codes;
* ``_admin``: namespace commands (``bind``, ``list``, ``create``, ``delete``);
* ``_read``: ``show``, ``count``, ``dump``, ``tail``;
* ``_write``: commands that change a log (``write``, ``truncate``, ``seal``);
* ``_dlsn``: ``dlsn encode`` / ``dlsn decode``;
* ``_bench``: ``bench`` and its engine;
* ``_gateway``: ``gateway`` (the py4j gateway of :mod:`jvm_shim`, imported only when it runs);
* ``_cold``: ``offload`` and ``restore`` (cold storage; ``bind --cold`` is in ``_admin``);
* ``_entry``: the ``dlog`` group, its top-level options, and the entry points :func:`run` and :func:`main`.
"""

from __future__ import annotations

from dlog._entry import cli, main, run

__all__ = ["cli", "main", "run"]
