"""Unit models of the virtual-time shell: FIFOs, pools of processors, co-processor pools.

Units are modeled as *fluids with whole packets*: a pool of ``count`` identical servers earns
``min(count, waiting) * dt`` microseconds of service credit per time step ``dt`` and spends it
on whole packets in FIFO order; credit left over from a half-served packet carries to the next
step, credit earned while idle is lost. Think of a team of cashiers paid by the minute: they
can only bank the minutes they spend at a till with a customer. Between events this makes the
cost of simulating a step independent of how many packets it moves, which is what lets the
simulator run hundreds of thousands of packets per wall-clock second (ARCHITECTURE: the
simulator is a first-class backend). The approximation error is below one packet's service
time per pool and step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from juggle.errors import ConfigurationError

__all__ = ["CoprocessorPool", "Fifo", "ProcessorPool", "service_us"]


def service_us(packet_bytes: int, mbit_per_s: float) -> float:
    """Time one co-processor needs for a packet: ``8 * packet_bytes / mbit_per_s`` µs.

    Raises :class:`~juggle.errors.ConfigurationError` for a non-positive size or rate.
    """
    if packet_bytes <= 0:
        raise ConfigurationError(f'"packet_bytes" must be > 0, got {packet_bytes!r}')
    if mbit_per_s <= 0:
        raise ConfigurationError(f'"mbit_per_s" must be > 0, got {mbit_per_s!r}')
    return 8.0 * packet_bytes / mbit_per_s


@dataclass(slots=True)
class Fifo:
    """A packet FIFO with a fill level; ``capacity`` None means unbounded.

    ``occupancy`` is the fill level as a fraction of ``nominal`` (the capacity, or for an
    unbounded FIFO the size it is judged against), clipped to 1.
    """

    name: str
    capacity: int | None
    nominal: int
    level: int = 0
    peak: int = 0

    def __post_init__(self) -> None:
        if self.nominal <= 0:
            raise ConfigurationError(f'FIFO {self.name!r}: "nominal" must be > 0')
        if self.capacity is not None and self.capacity <= 0:
            raise ConfigurationError(f'FIFO {self.name!r}: "capacity" must be > 0 or None')

    @property
    def room(self) -> int:
        """Packets that still fit (a large number for an unbounded FIFO)."""
        if self.capacity is None:
            return 1 << 62
        return self.capacity - self.level

    @property
    def occupancy(self) -> float:
        """Fill level relative to ``nominal``, in 0..1."""
        return min(1.0, self.level / self.nominal)

    def set_level(self, level: int) -> None:
        """Set the fill level (for a FIFO whose level is computed, like FIFO_IN)."""
        self.level = level
        if level > self.peak:
            self.peak = level

    def put(self, packets: int) -> None:
        """Add ``packets`` (the caller checked :attr:`room`)."""
        self.level += packets
        if self.level > self.peak:
            self.peak = self.level

    def __repr__(self) -> str:
        cap = "inf" if self.capacity is None else str(self.capacity)
        return f"<Fifo {self.name} {self.level}/{cap}>"


@dataclass(slots=True)
class CoprocessorPool:
    """``count`` co-processors (DES, LZ, ...) that each take ``service_us`` per packet."""

    name: str
    count: int
    service_us: float
    credit: float = 0.0
    served: int = 0
    busy_us: float = 0.0

    def serve(self, fifo: Fifo, dt: float) -> int:
        """Serve packets from ``fifo`` for ``dt`` µs; returns how many finished."""
        waiting = fifo.level
        if waiting == 0 or self.count == 0:
            self.credit = 0.0
            return 0
        busy = (self.count if waiting >= self.count else waiting) * dt
        credit = self.credit + busy
        self.busy_us += busy
        done = int(credit / self.service_us)
        if done >= waiting:
            done = waiting
            self.credit = 0.0
        else:
            self.credit = credit - done * self.service_us
        fifo.level = waiting - done
        self.served += done
        return done

    def __repr__(self) -> str:
        return f"<CoprocessorPool {self.name} x{self.count} {self.service_us:g} us/packet>"


@dataclass(slots=True)
class ProcessorPool:
    """``count`` processors; per-packet cost in cycles depends on the packet's flow.

    ``clock_mhz`` converts time to cycles (cycles per µs). Credit is kept in cycles.
    """

    name: str
    count: int
    clock_mhz: float
    cycles: tuple[int, ...] = field(default=())
    credit: float = 0.0
    busy_us: float = 0.0

    def __repr__(self) -> str:
        return f"<ProcessorPool {self.name} x{self.count} @ {self.clock_mhz:g} MHz>"
