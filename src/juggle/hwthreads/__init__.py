"""ReconOS-style hardware threads: OS objects, delegates, and threads that move between tiers.

Hardware threads are threads whose body runs in a fabric region (a *slot*) and that use the same
operating-system objects as software threads. A body is written once as a generator yielding OS
calls (:class:`MboxGet`, :class:`MutexLock`, :class:`BurstRead`, …), the way a VHDL state
machine calls ``reconos.*`` procedures; a :class:`ThreadRuntime` runs an instance of it in a
slot, where a :class:`Delegate` on the CPU executes its kernel calls, or in software, and can
suspend it at a :class:`YieldPoint` and resume it elsewhere.

Software threads use the objects directly: :class:`Mutex`, :class:`Semaphore`,
:class:`Condition`, :class:`Mailbox`, :class:`SharedMemory`.

The scenarios of the ReconOS paper that run on this library (the sort application, the model
of Table 2's eCos platform) live in :mod:`juggle.simulate.reconos`.

Figures follow the project's rule: software time is *measured* on this machine; fabric time is
*modeled* in cycles of a 100 MHz clock (:class:`HwTiming`), and reports keep the two apart.
"""

from juggle.hwthreads._allocslots import AllocatorSlots, AllocatorSlotStatistics, TenantSlots
from juggle.hwthreads._calls import (
    WOULD_BLOCK,
    BurstRead,
    BurstWrite,
    Busy,
    CallEnv,
    CheckSignal,
    CondBroadcast,
    CondSignal,
    CondWait,
    GetInitData,
    KernelCall,
    MboxGet,
    MboxPut,
    MboxTryget,
    MboxTryput,
    MemoryCall,
    MemRead,
    MemWrite,
    MutexLock,
    MutexRelease,
    MutexTrylock,
    MutexUnlock,
    OsCall,
    ResourceTable,
    SemPost,
    SemWait,
    ThreadExit,
    WouldBlockResult,
    YieldPoint,
    as_words,
)
from juggle.hwthreads._delegate import Delegate, DelegateStatistics, Osif
from juggle.hwthreads._memory import MemoryStatistics, SharedMemory
from juggle.hwthreads._objects import (
    Condition,
    ConditionStatistics,
    Mailbox,
    MailboxStatistics,
    Mutex,
    MutexStatistics,
    Semaphore,
    SemaphoreStatistics,
)
from juggle.hwthreads._runtime import ThreadRuntime
from juggle.hwthreads._slots import FixedSlots, SlotProvider, SlotStatistics, ThreadSlot
from juggle.hwthreads._thread import (
    TRANSITIONS,
    HardwareThread,
    ThreadDescription,
    ThreadState,
    ThreadStatistics,
    ThreadTier,
)
from juggle.hwthreads._timing import HwTiming

__all__ = [
    "TRANSITIONS",
    "WOULD_BLOCK",
    "AllocatorSlotStatistics",
    "AllocatorSlots",
    "BurstRead",
    "BurstWrite",
    "Busy",
    "CallEnv",
    "CheckSignal",
    "CondBroadcast",
    "CondSignal",
    "CondWait",
    "Condition",
    "ConditionStatistics",
    "Delegate",
    "DelegateStatistics",
    "FixedSlots",
    "GetInitData",
    "HardwareThread",
    "HwTiming",
    "KernelCall",
    "Mailbox",
    "MailboxStatistics",
    "MboxGet",
    "MboxPut",
    "MboxTryget",
    "MboxTryput",
    "MemRead",
    "MemWrite",
    "MemoryCall",
    "MemoryStatistics",
    "Mutex",
    "MutexLock",
    "MutexRelease",
    "MutexStatistics",
    "MutexTrylock",
    "MutexUnlock",
    "OsCall",
    "Osif",
    "ResourceTable",
    "SemPost",
    "SemWait",
    "Semaphore",
    "SemaphoreStatistics",
    "SharedMemory",
    "SlotProvider",
    "SlotStatistics",
    "TenantSlots",
    "ThreadDescription",
    "ThreadExit",
    "ThreadRuntime",
    "ThreadSlot",
    "ThreadState",
    "ThreadStatistics",
    "ThreadTier",
    "WouldBlockResult",
    "YieldPoint",
    "as_words",
]
