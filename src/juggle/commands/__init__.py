"""The ``juggle`` command line and its console helpers.

:mod:`.cli` is the typer app (the ``juggle`` console script); each command group has its
module (:mod:`.module`, :mod:`.profile`, :mod:`.demo`, :mod:`.bench`, :mod:`.shell`,
:mod:`.remote`, :mod:`.simulate`); :mod:`.output` prints documents and errors the one way
every command does, :mod:`.progressbar` draws the progress of long commands. Commands read
snapshots and send commands through the library's API; no library package imports them.
"""
