"""The exception tree of juggle.

Every error juggle raises on purpose is a :class:`JuggleError`. Each carries the object it
is about in ``subject`` (a path, a service id, a region name, a value) and its message names
the offending argument and value. Bad input is rejected before any state changes, so catching
one of these means nothing was half-done.

::

    JuggleError
    ├── AllocatorError
    │   ├── DeviceStateError
    │   ├── DuplicateTenantError
    │   ├── IllegalTransitionError
    │   ├── InterfaceError (ValueError)
    │   ├── NoCompatibleRegionError
    │   ├── PriorityError
    │   ├── TaskIndexError
    │   ├── TenancyError
    │   │   ├── DeviceWaitTimeoutError (TimeoutError)
    │   │   ├── NotATenantError
    │   │   ├── ProgrammingModelError (ValueError)
    │   │   ├── TenancyClosedError
    │   │   └── WaitSignal
    │   ├── TimeOrderError (ValueError)
    │   ├── UnknownActionError
    │   ├── UnknownDeviceError
    │   └── UnknownTenantError
    ├── ConfigurationError
    │   ├── DescriptorError
    │   │   ├── UnknownClassError
    │   │   └── UnknownInterfaceError
    │   ├── DfxPackageError
    │   ├── InputLimitError
    │   ├── ModelRegistrationError
    │   ├── PluginError
    │   ├── ProfileError
    │   └── VersionFormatError (ValueError)
    ├── ControllerError
    ├── DaemonError
    │   ├── AccessDeniedError (PermissionError)
    │   ├── DaemonUnavailableError (ConnectionError)
    │   │   └── DaemonShuttingDownError
    │   ├── PolicyError (ConfigurationError)
    │   ├── ProtocolError
    │   ├── QuotaExceededError
    │   └── RemoteError
    ├── FabricError
    │   ├── BackendError
    │   ├── BitstreamError
    │   │   ├── BitstreamFamilyError
    │   │   ├── BitstreamFormatError
    │   │   │   ├── SyncWordError
    │   │   │   └── TruncatedBitstreamError
    │   │   ├── BitstreamTooLargeError
    │   │   ├── MissingBitstreamError
    │   │   ├── NotPartialError
    │   │   ├── PartMismatchError
    │   │   ├── RegionMismatchError
    │   │   └── UnknownDesignError
    │   ├── BridgeError
    │   ├── BusFaultError
    │   ├── CoreTimeoutError
    │   ├── HardwareFaultError
    │   ├── ProgrammingError
    │   ├── RegionBusyError
    │   ├── RegionEmptyError
    │   ├── ResourceError
    │   ├── UnknownRegionError (KeyError)
    │   ├── WindowAccessError
    │   └── WindowAttachError
    ├── HardwareThreadError
    │   ├── HandleError (KeyError)
    │   ├── HwThreadArgumentError (ValueError)
    │   ├── MutexOwnerError
    │   ├── NoFreeSlotError
    │   ├── OsCallTimeoutError (TimeoutError)
    │   ├── ThreadFailedError
    │   ├── ThreadStateError
    │   └── WouldBlock
    ├── JuggleOperationError
    │   ├── DrainTimeoutError
    │   ├── SanityCheckError
    │   └── TierUnavailableError
    ├── FrameworkClosedError
    ├── ModuleError
    │   ├── DuplicateModuleError
    │   ├── IntegrityError
    │   │   └── SignatureError
    │   ├── ModuleCodeError
    │   ├── ModuleStateError
    │   └── UnknownModuleError
    ├── RegistryError
    │   ├── AlreadyUnregisteredError
    │   ├── FilterSyntaxError (ValueError)
    │   ├── InvalidConsumerError (ValueError)
    │   ├── RegistrationError (ValueError)
    │   │   └── PropertyError
    │   ├── ServiceFactoryError
    │   ├── ServiceUnavailableError
    │   └── UnknownServiceError (KeyError)
    ├── ServiceArgumentError (ValueError)
    │   ├── BlockSizeError
    │   ├── BufferSizeError
    │   ├── KeyLengthError
    │   └── OperandRangeError
    └── ServiceStateError (RuntimeError)
        └── KeyNotLoadedError
"""

from __future__ import annotations

from typing import Any


class JuggleError(Exception):
    """Root of every error juggle raises on purpose.

    ``subject`` is the object or value the error is about (a path, a service id, ...).
    """

    def __init__(self, message: str, subject: Any = None) -> None:
        super().__init__(message)
        self.subject = subject


# -- configuration ---------------------------------------------------------------------------


class ConfigurationError(JuggleError):
    """A profile, descriptor, plugin or option is malformed."""


class ProfileError(ConfigurationError):
    """A board profile is unknown or does not validate."""


class DescriptorError(ConfigurationError):
    """A module descriptor (juggle.toml or co-module XML) is invalid."""


class UnknownInterfaceError(DescriptorError):
    """A descriptor names a service interface that resolves nowhere."""


class UnknownClassError(DescriptorError):
    """A descriptor names an implementation or driver class the module does not define."""


class PluginError(ConfigurationError):
    """A controller plugin is malformed; ``subject`` is the plugin."""


class InputLimitError(ConfigurationError):
    """Input exceeds a limit of :class:`juggle.limits.Limits` (size, nesting depth, digits,
    archive members, compression ratio); raised before the input is read or parsed further.
    ``subject`` is the offending path or value."""


# -- modules and registry --------------------------------------------------------------------


class ModuleError(JuggleError):
    """Module lifecycle errors."""


class ModuleStateError(ModuleError):
    """A lifecycle transition is not legal from the module's current state."""


class UnknownModuleError(ModuleError):
    """No installed module has that id or name."""


class DuplicateModuleError(ModuleError):
    """The module (same source, or same name and version) is installed already."""


class ModuleCodeError(ModuleError):
    """A module's own code failed (at import, in a constructor, in ``update``); the original
    exception is chained as ``__cause__`` and ``subject`` names the module."""


class IntegrityError(ModuleError):
    """A module file does not match its pinned ``sha256``, or a path leaves the module."""


class SignatureError(IntegrityError):
    """A module is unsigned or badly signed while the framework requires trusted signatures."""


class FrameworkClosedError(JuggleError):
    """The framework was closed: no method may be used any more."""


class RegistryError(JuggleError):
    """Service registry errors."""


class FilterSyntaxError(RegistryError, ValueError):
    """An LDAP filter string does not parse (RFC 4515)."""


class UnknownServiceError(RegistryError, KeyError):
    """No registered service has that id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ServiceUnavailableError(RegistryError):
    """No registered service matches the interface and filter."""


# -- fabric ----------------------------------------------------------------------------------


class FabricError(JuggleError):
    """Errors of the reconfigurable fabric and its backends."""


class UnknownRegionError(FabricError, KeyError):
    """No region of that name on this fabric."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class BitstreamError(FabricError):
    """A bitstream is unusable; nothing was written to the fabric."""


class BitstreamFormatError(BitstreamError):
    """The bitstream header does not parse."""


class MissingBitstreamError(BitstreamError):
    """A bitstream file named by a descriptor does not exist."""


class PartMismatchError(BitstreamError):
    """The bitstream was built for another device (part)."""


class RegionMismatchError(BitstreamError):
    """The bitstream was built for another region."""


class BitstreamTooLargeError(BitstreamError):
    """The bitstream is larger than the region's configuration frames."""


class ResourceError(FabricError):
    """A hardware module needs more resources than the region offers."""


class RegionBusyError(FabricError):
    """The region is occupied or in use."""


class ProgrammingError(FabricError):
    """Writing a bitstream through the configuration port failed."""


class BridgeError(FabricError):
    """A bridge (decoupler) did not reach the requested state."""


# -- the juggle operation --------------------------------------------------------------------


class JuggleOperationError(JuggleError):
    """The juggle primitive refused or rolled back; the services serve as before."""


class SanityCheckError(JuggleOperationError):
    """A check before reconfiguring failed (region not free, not adjacent, capacity)."""


class TierUnavailableError(JuggleOperationError):
    """The service has no implementation at the requested tier."""


class DrainTimeoutError(JuggleOperationError):
    """Calls in flight on the old implementation did not finish in time."""


# -- services --------------------------------------------------------------------------------


class ServiceArgumentError(JuggleError, ValueError):
    """A service method got a bad argument (wrong key length, size not a block multiple), or a
    call that does not fit the interface method's signature (an unknown keyword, a missing or
    surplus argument: the proxy refuses it before any implementation runs, and its ``subject``
    is ``(method, argument)``)."""


# -- policies, allocation, hardware threads --------------------------------------------------


class ControllerError(JuggleError):
    """A controller (policy) failed or was misconfigured."""


class AllocatorError(JuggleError):
    """Errors of the fabric allocator (tenants, devices, regions)."""


class UnknownTenantError(AllocatorError):
    """No tenant of that name."""


class UnknownDeviceError(AllocatorError):
    """No device (accelerator function) of that name."""


class NoCompatibleRegionError(AllocatorError):
    """No region of the fabric can hold that device."""


class PriorityError(AllocatorError):
    """A priority is out of range."""


class IllegalTransitionError(AllocatorError):
    """The region state machine does not allow that transition."""


class HardwareThreadError(JuggleError):
    """Errors of hardware threads, delegates and OS objects."""


# -- area sections: helpers add their own subclasses below their marker ------------------------


# -- runtime: registry and LDAP filters (runtime/registry.py, runtime/ldapfilter.py) ----------


class RegistrationError(RegistryError, ValueError):
    """A service or listener registration was refused; nothing was registered.

    ``subject`` is the offending value (an interface list, a name, a callback).
    """


class PropertyError(RegistrationError):
    """Service properties are malformed (a key that is not a non-empty string, two keys that
    differ only in case, a ``service.ranking`` that is not an int); ``subject`` is the key."""


class AlreadyUnregisteredError(RegistryError):
    """The registration was already unregistered (or is being unregistered).

    ``subject`` is the service id.
    """


class ServiceFactoryError(RegistryError):
    """A service factory raised or returned None for a consumer; ``subject`` is the reference."""


class InvalidConsumerError(RegistryError, ValueError):
    """A consumer name is not a non-empty string; ``subject`` is the value."""


class VersionFormatError(ConfigurationError, ValueError):
    """A version is not OSGi ``major[.minor[.micro[.qualifier]]]``; ``subject`` is the text."""


# -- fabric layer (fabric/: profiles, bitstreams, manager/bridge/region, sim and linux) -----


class UnknownDesignError(BitstreamError):
    """No register model (simulated backend) is known for the design a bitstream carries."""


class WindowAccessError(FabricError):
    """An MMIO access at a bad offset (unaligned, outside the window) or on a closed window."""


class RegionEmptyError(FabricError):
    """The region holds no usable design (empty, or left in ERROR by a failed program)."""


class WindowAttachError(FabricError):
    """The register window of a freshly programmed design could not be attached."""


class ModelRegistrationError(ConfigurationError):
    """A register model offered to a model catalog is malformed."""


class BackendError(FabricError):
    """A fabric backend resource (sysfs node, device file, option) is missing or unusable."""


# -- services (services/: crypto, arith, audio reference services) ---------------------------


class KeyLengthError(ServiceArgumentError):
    """A cipher key has the wrong length (DES: 8 bytes; TDES: 16 or 24; AES-128: 16); names the
    length."""


class BlockSizeError(ServiceArgumentError):
    """A size is not a multiple of the cipher's block size (8 bytes for DES/TDES)."""


class BufferSizeError(ServiceArgumentError):
    """A size is negative or larger than the buffer it refers to."""


class OperandRangeError(ServiceArgumentError):
    """An operand is not an int in the 32-bit two's-complement range."""


class ServiceStateError(JuggleError, RuntimeError):
    """A service method was called in a state that does not allow it."""


class KeyNotLoadedError(ServiceStateError):
    """``encrypt``/``decrypt`` was called before ``load_key``."""


class CoreTimeoutError(FabricError):
    """A hardware core did not report done within the driver's polling budget."""


class HardwareFaultError(FabricError):
    """A hardware call failed (hung, raised, or returned a wrong result) and the service has
    no software tier to serve it instead; ``subject`` is ``(service_id, region)``. The region
    is quarantined (ERROR) until :meth:`juggle.Framework.recover`."""


# -- allocator (issue 3: tenants, priorities, preemption) ----------------------------------


class DuplicateTenantError(AllocatorError):
    """A tenant of that name is already registered."""


class TaskIndexError(AllocatorError):
    """The hardware task index is inconsistent (a device placed in a region it does not fit)."""


class DeviceStateError(AllocatorError):
    """The virtual device is not in a state that allows the call (already queued, running...)."""


class TimeOrderError(AllocatorError, ValueError):
    """An event is stamped earlier than one the allocator already processed."""


class InterfaceError(AllocatorError, ValueError):
    """A virtual device interface got a bad register value or an oversized context."""


class UnknownActionError(AllocatorError):
    """A shell was asked to execute a value that is not an allocator action; ``subject`` is
    that value."""


# -- hwthreads (ReconOS threads, delegates, OS objects) --------------------------------------


class WouldBlock(HardwareThreadError):
    """A non-blocking OS call (trylock, tryget, tryput, trywait) could not proceed at once."""


class OsCallTimeoutError(HardwareThreadError, TimeoutError):
    """A blocking OS call, join or suspend did not complete within its timeout."""


class MutexOwnerError(HardwareThreadError):
    """A mutex was unlocked by a thread that does not own it, or relocked by its owner."""


class HandleError(HardwareThreadError, KeyError):
    """A thread used a resource handle its table lacks, or one naming the wrong kind of object."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ThreadStateError(HardwareThreadError):
    """A hardware-thread lifecycle transition is not legal from the thread's current state."""


class NoFreeSlotError(HardwareThreadError):
    """No hardware slot compatible with the thread is free."""


class ThreadFailedError(HardwareThreadError):
    """A thread body raised; the original exception is the ``__cause__``."""


class HwThreadArgumentError(HardwareThreadError, ValueError):
    """An OS object or thread call got a bad argument (capacity, address, size)."""


# -- runtime tenancy (runtime/tenancy.py: the allocator arbitrates live calls, issue 3 item 9) --


class TenancyError(AllocatorError):
    """Errors of the live tenant arbiter (tenants sharing the fabric through virtual devices)."""


class ProgrammingModelError(TenancyError, ValueError):
    """A tenant's programming model is neither ``"native"`` nor ``"aware"``; names the value."""


class NotATenantError(TenancyError):
    """A consumer that is not a registered tenant asked for an arbitrated hardware service;
    ``subject`` is the consumer name."""


class WaitSignal(TenancyError):
    """WAIT for an aware tenant: its device is not connected, so the call did not run.

    The request stays on the allocator's wait list (or its solution is under way); READY
    arrives on the tenant's signal channel, then the call can be made again. ``subject`` is
    ``(tenant, device)``; ``service_id`` names the service called.
    """

    def __init__(self, message: str, subject: Any = None, *, service_id: int | None = None):
        super().__init__(message, subject)
        self.service_id = service_id


class DeviceWaitTimeoutError(TenancyError, TimeoutError):
    """A native tenant's call waited longer than the arbiter's bound for its device; the call
    did not run and a request still on the wait list was withdrawn."""


class TenancyClosedError(TenancyError):
    """The framework (and its tenant arbiter) was closed while a call waited or was made."""


# -- daemon (the juggle daemon, its protocol and its clients) --------------------------------


class DaemonError(JuggleError):
    """Errors of the juggle daemon, its protocol and its clients."""


class AccessDeniedError(DaemonError, PermissionError):
    """The daemon refused: uid not mapped by the tenant policy, operation needs the admin
    group, or service outside the tenant's allowed services. ``subject``: the uid or op."""


class DaemonUnavailableError(DaemonError, ConnectionError):
    """No daemon listens on the socket, or the connection dropped; ``subject``: the path.
    A call in flight when the connection dropped may or may not have run."""


class DaemonShuttingDownError(DaemonUnavailableError):
    """The daemon is shutting down: running calls finish, new ones are refused."""


class PolicyError(DaemonError, ConfigurationError):
    """The tenant policy file does not parse or validate; ``subject``: the path."""


class ProtocolError(DaemonError):
    """A frame is malformed, too large, of another protocol version, or names an unknown
    operation; the daemon closes the connection that sent a malformed frame."""


class QuotaExceededError(DaemonError):
    """A tenant exceeded its calls-per-second or services-held quota; ``subject``: tenant."""


class RemoteError(DaemonError):
    """The daemon raised an exception that is not a juggle error (or of a class the client
    does not know); ``remote_type`` names its class."""

    def __init__(self, message: str, subject: Any = None, *, remote_type: str = "") -> None:
        super().__init__(message, subject)
        self.remote_type = remote_type


class BusFaultError(FabricError):
    """A register access raised SIGBUS (a decoupled, reset or unmapped slot, or a file
    truncated under its mapping); ``subject`` is ``(path, offset)``. A hardware fault the
    fault containment handles, not a crash."""


class DfxPackageError(ConfigurationError):
    """A dfx-mgr package folder (``shell.json``, ``accel.json``, ``<accel>_slot<N>/``) is
    malformed; ``subject`` is ``(file, field)`` and the message names both."""


class TruncatedBitstreamError(BitstreamFormatError):
    """A bitstream's header ends inside a field; the message names the file and the field."""


class SyncWordError(BitstreamFormatError):
    """A headerless bitstream (``.bin``) has no configuration sync word (0xAA995566, in any
    word order) within the prefix where tools put it; the message names the file."""


class BitstreamFamilyError(BitstreamError):
    """A bitstream (its format, or the family of its ``part``) is not what the target family's
    FPGA manager takes (a ``.pdi`` for a ZynqMP, a ``.bit`` for a Versal, an unknown family);
    the message names the file and the field."""


class NotPartialError(BitstreamError):
    """A full-device image where a partial one is expected (the design field carries no
    ``PARTIAL=TRUE``); the message names the file and the field."""
