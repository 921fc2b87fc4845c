"""The exception tree of juggle.

Every error juggle raises on purpose is a :class:`JuggleError`, and its message names the
offending argument and value. Bad input is rejected before any state changes, so catching one
of these means nothing was half-done.

Each branch says what its errors are about in typed, keyword-only attributes, None when a
raise site does not know them: a :class:`FabricError` names its ``region``, a
:class:`ModuleError` its ``module``, a :class:`RegistryError` its ``service_id``. A value in
``value`` is the offending value itself when it is a number or a string (:data:`Scalar`).
:meth:`JuggleError.attributes` lists them; the daemon sends them to its clients, which raise
the same class with the same attributes.

The drawing shows each class under its first base, its other bases in parentheses, and in
brackets its attributes (the keywords of its constructor) where they differ from its first
base's::

    JuggleError
    ├── AllocatorError  [tenant, device, region, value]
    │   ├── DeviceStateError
    │   ├── DuplicateTenantError
    │   ├── IllegalTransitionError
    │   ├── InterfaceError (ValueError)
    │   ├── NoCompatibleRegionError
    │   ├── PriorityError
    │   ├── TaskIndexError
    │   ├── TenancyError
    │   │   ├── DeviceWaitTimeoutError (TimeoutError)
    │   │   ├── NotATenantError  [consumer]
    │   │   ├── ProgrammingModelError (ValueError)
    │   │   ├── TenancyClosedError
    │   │   └── WaitSignal  [tenant, device, service_id]
    │   ├── TimeOrderError (ValueError)
    │   ├── UnknownActionError
    │   ├── UnknownDeviceError
    │   └── UnknownTenantError
    ├── ConfigurationError  [path, value]
    │   ├── DescriptorError
    │   │   ├── UnknownClassError  [path, class_name]
    │   │   └── UnknownInterfaceError  [path, interface]
    │   ├── DfxPackageError  [path, field]
    │   ├── InputLimitError
    │   ├── ModelRegistrationError  [design, value]
    │   ├── PluginError  [plugin]
    │   ├── ProfileError  [profile, path, value]
    │   └── VersionFormatError (ValueError)
    ├── ControllerError  [controller, value]
    ├── DaemonError  [tenant, path]
    │   ├── AccessDeniedError (PermissionError)  [uid, operation, path]
    │   ├── CertificateError (ConfigurationError)  [path, value]
    │   ├── DaemonIdentityError (PermissionError)  [uid, path, value]
    │   ├── DaemonUnavailableError (ConnectionError)  [path]
    │   │   └── DaemonShuttingDownError
    │   ├── DashboardError (ConfigurationError)  [path, value]
    │   ├── PolicyError (ConfigurationError)  [path]
    │   ├── ProtocolError  [operation, value]
    │   ├── QuotaExceededError  [tenant]
    │   │   ├── LimitExceededError  [tenant, limit, value]
    │   │   └── RegionQuotaExceededError
    │   ├── RemoteError  [remote_type]
    │   ├── SpinLimitError (ConfigurationError)  [value]
    │   └── UnsafePathError (ConfigurationError)  [path]
    ├── FabricError  [region, design, value]
    │   ├── BackendError  [region, design, path, value]
    │   ├── BitstreamError  [region, design, path, field, value]
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
    │   ├── BusFaultError  [region, path, offset]
    │   ├── CoreTimeoutError
    │   ├── HardwareFaultError  [region, service_id]
    │   ├── ProgrammingError  [region, design, path, value]
    │   ├── RegionBusyError
    │   ├── RegionEmptyError  [region, path]
    │   ├── ResourceError
    │   ├── UnknownRegionError (KeyError)
    │   ├── WindowAccessError  [region, path, offset, value]
    │   │   └── BusResponseError  [region, offset, response]
    │   └── WindowAttachError
    ├── FrameworkClosedError
    ├── HardwareThreadError  [thread, value]
    │   ├── HandleError (KeyError)  [thread, handle]
    │   ├── HwThreadArgumentError (ValueError)
    │   ├── MutexOwnerError  [os_object]
    │   ├── NoFreeSlotError  [design]
    │   ├── OsCallTimeoutError (TimeoutError)
    │   ├── ThreadFailedError
    │   ├── ThreadStateError
    │   └── WouldBlock  [os_object]
    ├── JuggleOperationError  [service_id]
    │   ├── DrainTimeoutError
    │   ├── SanityCheckError  [service_id, region]
    │   └── TierUnavailableError  [service_id, tier]
    ├── ModuleError  [module, path]
    │   ├── DuplicateModuleError
    │   ├── IntegrityError
    │   │   └── SignatureError
    │   ├── ModuleCodeError  [module, path, region]
    │   ├── ModuleStateError
    │   └── UnknownModuleError
    ├── RegistryError  [service_id]
    │   ├── AlreadyUnregisteredError
    │   ├── FilterSyntaxError (ValueError)  [filter]
    │   ├── InvalidConsumerError (ValueError)  [value]
    │   ├── RegistrationError (ValueError)  [value]
    │   │   └── PropertyError  [key, value]
    │   ├── ServiceFactoryError
    │   ├── ServiceUnavailableError  [service_id, interface]
    │   └── UnknownServiceError (KeyError)  [service_id, value]
    ├── ServiceArgumentError (ValueError)  [method, argument, value]
    │   ├── BlockSizeError
    │   ├── BufferSizeError
    │   ├── KeyLengthError
    │   └── OperandRangeError
    └── ServiceStateError (RuntimeError)  [service_id, region, method]
        └── KeyNotLoadedError
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping

#: what a ``value`` attribute holds: the offending value when it is a number or a string
#: (a value of another type is named in the message only)
Scalar = str | int | float | None


class JuggleError(Exception):
    """Root of every error juggle raises on purpose.

    Its branches carry typed attributes saying what the error is about (see the module's
    drawing); :meth:`attributes` lists them.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)

    @classmethod
    def attribute_types(cls) -> Mapping[str, tuple[type, ...]]:
        """The attributes errors of this class carry (the keywords of its constructor), each
        with the types its value may have (``NoneType`` among them)."""
        return _attribute_types(cls)

    def attributes(self) -> dict[str, Scalar]:
        """This error's attributes (the keywords of its constructor) and their values."""
        out: dict[str, Scalar] = {}
        for name in _attribute_types(type(self)):
            value: Scalar = getattr(self, name)
            out[name] = value
        return out


_ATTRIBUTE_TYPES: dict[type[JuggleError], Mapping[str, tuple[type, ...]]] = {}


def _attribute_types(cls: type[JuggleError]) -> Mapping[str, tuple[type, ...]]:
    known = _ATTRIBUTE_TYPES.get(cls)
    if known is not None:
        return known
    init = cls.__init__
    hints = typing.get_type_hints(init)
    out: dict[str, tuple[type, ...]] = {}
    for name, param in inspect.signature(init).parameters.items():
        if param.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        hint = hints[name]
        if isinstance(hint, types.UnionType):
            out[name] = tuple(typing.get_args(hint))
        elif isinstance(hint, type):
            out[name] = (hint,)
        else:
            raise TypeError(f"{cls.__name__}.{name}: annotation {hint!r} is no class or union")
    _ATTRIBUTE_TYPES[cls] = found = types.MappingProxyType(out)
    return found


def scalar(value: object) -> Scalar:
    """``value`` when it is a string or a number (a bool included), else None: what a raise
    site passes as an error's ``value`` when the offending value may be of any type."""
    return value if isinstance(value, str | int | float) else None


# -- configuration ---------------------------------------------------------------------------


class ConfigurationError(JuggleError):
    """A profile, descriptor, plugin or option is malformed.

    ``path``: the file at fault; ``value``: the offending option value.
    """

    def __init__(self, message: str, *, path: str | None = None, value: Scalar = None) -> None:
        super().__init__(message)
        self.path = path
        self.value = value


class ProfileError(ConfigurationError):
    """A board profile is unknown or does not validate; ``profile`` names it."""

    def __init__(
        self,
        message: str,
        *,
        profile: str | None = None,
        path: str | None = None,
        value: Scalar = None,
    ) -> None:
        super().__init__(message, path=path, value=value)
        self.profile = profile


class DescriptorError(ConfigurationError):
    """A module descriptor (juggle.toml or co-module XML) is invalid; ``path`` names it."""


class UnknownInterfaceError(DescriptorError):
    """A descriptor names a service interface that resolves nowhere; ``interface`` is the
    name."""

    def __init__(
        self, message: str, *, path: str | None = None, interface: str | None = None
    ) -> None:
        super().__init__(message, path=path)
        self.interface = interface


class UnknownClassError(DescriptorError):
    """A descriptor names an implementation or driver class the module does not define (or
    one that does not fit); ``class_name`` is the name as written."""

    def __init__(
        self, message: str, *, path: str | None = None, class_name: str | None = None
    ) -> None:
        super().__init__(message, path=path)
        self.class_name = class_name


class PluginError(ConfigurationError):
    """A controller plugin is malformed; ``plugin`` names it (or the class it provides)."""

    def __init__(self, message: str, *, plugin: str | None = None) -> None:
        super().__init__(message)
        self.plugin = plugin


class InputLimitError(ConfigurationError):
    """Input exceeds a limit of :class:`juggle.limits.Limits` (size, nesting depth, digits,
    archive members, compression ratio); raised before the input is read or parsed further.
    ``path``: the file; ``value``: the key, element or value at fault."""


class VersionFormatError(ConfigurationError, ValueError):
    """A version is not OSGi ``major[.minor[.micro[.qualifier]]]``; ``value`` is the text."""


class ModelRegistrationError(ConfigurationError):
    """A register model offered to a model catalog is malformed; ``design`` names the design,
    ``value`` the offending value."""

    def __init__(self, message: str, *, design: str | None = None, value: Scalar = None) -> None:
        super().__init__(message, value=value)
        self.design = design


class DfxPackageError(ConfigurationError):
    """A dfx-mgr package folder (``shell.json``, ``accel.json``, ``<accel>_slot<N>/``) is
    malformed; ``path`` and ``field`` name the file and the field (or accelerator), and the
    message names both."""

    def __init__(self, message: str, *, path: str | None = None, field: str | None = None) -> None:
        super().__init__(message, path=path)
        self.field = field


# -- modules and registry --------------------------------------------------------------------


class ModuleError(JuggleError):
    """Module lifecycle errors; ``module`` names the module, ``path`` the file or folder."""

    def __init__(self, message: str, *, module: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.module = module
        self.path = path


class ModuleStateError(ModuleError):
    """A lifecycle transition is not legal from the module's current state."""


class UnknownModuleError(ModuleError):
    """No installed module has that id or name."""


class DuplicateModuleError(ModuleError):
    """The module (same source, or same name and version) is installed already."""


class ModuleCodeError(ModuleError):
    """A module's own code failed (at import, in a constructor, in ``update``); the original
    exception is chained as ``__cause__``. ``module`` names the module, ``path`` its code
    file, ``region`` the region a driver failed to start in."""

    def __init__(
        self,
        message: str,
        *,
        module: str | None = None,
        path: str | None = None,
        region: str | None = None,
    ) -> None:
        super().__init__(message, module=module, path=path)
        self.region = region


class IntegrityError(ModuleError):
    """A module file does not match its pinned ``sha256``, or a path leaves the module;
    ``path`` is the file."""


class SignatureError(IntegrityError):
    """A module is unsigned or badly signed while the framework requires trusted signatures."""


class FrameworkClosedError(JuggleError):
    """The framework was closed: no method may be used any more."""


class RegistryError(JuggleError):
    """Service registry errors; ``service_id`` names the service."""

    def __init__(self, message: str, *, service_id: int | None = None) -> None:
        super().__init__(message)
        self.service_id = service_id


class FilterSyntaxError(RegistryError, ValueError):
    """An LDAP filter string does not parse (RFC 4515); ``filter`` is the text."""

    def __init__(self, message: str, *, filter: str | None = None) -> None:
        super().__init__(message)
        self.filter = filter


class UnknownServiceError(RegistryError, KeyError):
    """No registered service has that id; ``service_id`` is the id, or ``value`` what was
    given where an id was expected."""

    def __init__(
        self, message: str, *, service_id: int | None = None, value: Scalar = None
    ) -> None:
        super().__init__(message, service_id=service_id)
        self.value = value

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ServiceUnavailableError(RegistryError):
    """No registered service matches the interface and filter (``interface``), or the service
    (``service_id``) is gone."""

    def __init__(
        self, message: str, *, service_id: int | None = None, interface: str | None = None
    ) -> None:
        super().__init__(message, service_id=service_id)
        self.interface = interface


# -- fabric ----------------------------------------------------------------------------------


class FabricError(JuggleError):
    """Errors of the reconfigurable fabric and its backends; ``region`` and ``design`` name
    the region and the design concerned, ``value`` an offending value."""

    def __init__(
        self,
        message: str,
        *,
        region: str | None = None,
        design: str | None = None,
        value: Scalar = None,
    ) -> None:
        super().__init__(message)
        self.region = region
        self.design = design
        self.value = value


class UnknownRegionError(FabricError, KeyError):
    """No region of that name on this fabric."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class BitstreamError(FabricError):
    """A bitstream is unusable; nothing was written to the fabric. ``path`` is the bitstream
    (its file or source name), ``field`` the header field at fault."""

    def __init__(
        self,
        message: str,
        *,
        region: str | None = None,
        design: str | None = None,
        path: str | None = None,
        field: str | None = None,
        value: Scalar = None,
    ) -> None:
        super().__init__(message, region=region, design=design, value=value)
        self.path = path
        self.field = field


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
    """A hardware module needs more resources than the region offers, or resource counts are
    malformed."""


class RegionBusyError(FabricError):
    """The region is occupied or in use."""


class ProgrammingError(FabricError):
    """Writing a bitstream through the configuration port failed; ``path`` names the port's
    file or socket."""

    def __init__(
        self,
        message: str,
        *,
        region: str | None = None,
        design: str | None = None,
        path: str | None = None,
        value: Scalar = None,
    ) -> None:
        super().__init__(message, region=region, design=design, value=value)
        self.path = path


class BridgeError(FabricError):
    """A bridge (decoupler) did not reach the requested state."""


# -- the juggle operation --------------------------------------------------------------------


class JuggleOperationError(JuggleError):
    """The juggle primitive refused or rolled back; the services serve as before.
    ``service_id`` names the service concerned."""

    def __init__(self, message: str, *, service_id: int | None = None) -> None:
        super().__init__(message)
        self.service_id = service_id


class SanityCheckError(JuggleOperationError):
    """A check before reconfiguring failed (region not free, not adjacent, capacity);
    ``region`` names the region concerned."""

    def __init__(
        self, message: str, *, service_id: int | None = None, region: str | None = None
    ) -> None:
        super().__init__(message, service_id=service_id)
        self.region = region


class TierUnavailableError(JuggleOperationError):
    """The service has no implementation at the requested ``tier``."""

    def __init__(
        self, message: str, *, service_id: int | None = None, tier: str | None = None
    ) -> None:
        super().__init__(message, service_id=service_id)
        self.tier = tier


class DrainTimeoutError(JuggleOperationError):
    """Calls in flight on the old implementation did not finish in time."""


# -- services --------------------------------------------------------------------------------


class ServiceArgumentError(JuggleError, ValueError):
    """A service method got a bad argument (wrong key length, size not a block multiple), or a
    call that does not fit the interface method's signature (an unknown keyword, a missing or
    surplus argument: the proxy refuses it before any implementation runs).

    ``method`` names the method (``"EncryptionService.encrypt"``), ``argument`` the argument
    (its name, or the 1-based position of a surplus positional one), ``value`` its value.
    """

    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        argument: str | int | None = None,
        value: Scalar = None,
    ) -> None:
        super().__init__(message)
        self.method = method
        self.argument = argument
        self.value = value


# -- policies, allocation, hardware threads --------------------------------------------------


class ControllerError(JuggleError):
    """A controller (policy) failed or was misconfigured; ``controller`` names it, ``value``
    is the offending option value."""

    def __init__(
        self, message: str, *, controller: str | None = None, value: Scalar = None
    ) -> None:
        super().__init__(message)
        self.controller = controller
        self.value = value


class AllocatorError(JuggleError):
    """Errors of the fabric allocator (tenants, devices, regions): ``tenant``, ``device`` and
    ``region`` name them, ``value`` is an offending value (a priority, a time)."""

    def __init__(
        self,
        message: str,
        *,
        tenant: str | None = None,
        device: str | None = None,
        region: str | None = None,
        value: Scalar = None,
    ) -> None:
        super().__init__(message)
        self.tenant = tenant
        self.device = device
        self.region = region
        self.value = value


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
    """Errors of hardware threads, delegates and OS objects; ``thread`` names the thread,
    ``value`` an offending value."""

    def __init__(self, message: str, *, thread: str | None = None, value: Scalar = None) -> None:
        super().__init__(message)
        self.thread = thread
        self.value = value


# -- runtime: registry and LDAP filters (runtime/registry.py, runtime/ldapfilter.py) ----------


class RegistrationError(RegistryError, ValueError):
    """A service or listener registration was refused; nothing was registered. ``value`` is
    the offending value (an interface name, a module id)."""

    def __init__(self, message: str, *, value: Scalar = None) -> None:
        super().__init__(message)
        self.value = value


class PropertyError(RegistrationError):
    """Service properties are malformed (a key that is not a non-empty string, two keys that
    differ only in case, a ``service.ranking`` that is not an int); ``key`` is the key,
    ``value`` its value."""

    def __init__(self, message: str, *, key: str | None = None, value: Scalar = None) -> None:
        super().__init__(message, value=value)
        self.key = key


class AlreadyUnregisteredError(RegistryError):
    """The registration (``service_id``) was already unregistered (or is being
    unregistered)."""


class ServiceFactoryError(RegistryError):
    """A service factory raised or returned None for a consumer."""


class InvalidConsumerError(RegistryError, ValueError):
    """A consumer name is not a non-empty string; ``value`` is the value."""

    def __init__(self, message: str, *, value: Scalar = None) -> None:
        super().__init__(message)
        self.value = value


# -- fabric layer (fabric/: profiles, bitstreams, manager/bridge/region, sim and linux) -----


class UnknownDesignError(BitstreamError):
    """No register model (simulated backend) is known for the design a bitstream carries."""


class WindowAccessError(FabricError):
    """An MMIO access at a bad ``offset`` (unaligned, outside the window) or of a bad
    ``value``, or on a closed window; ``path`` names the window's device or simulator."""

    def __init__(
        self,
        message: str,
        *,
        region: str | None = None,
        path: str | None = None,
        offset: int | None = None,
        value: Scalar = None,
    ) -> None:
        super().__init__(message, region=region, value=value)
        self.path = path
        self.offset = offset


class BusResponseError(WindowAccessError):
    """A register access reached the core and the core answered it with an error response
    (AXI4-Lite ``SLVERR`` or ``DECERR``, or ``EXOKAY``, which AXI4-Lite does not allow):
    ``region`` and ``offset`` name where, ``response`` the response. A hardware fault the
    fault containment handles (the region goes to ERROR)."""

    def __init__(
        self,
        message: str,
        *,
        region: str | None = None,
        offset: int | None = None,
        response: str | None = None,
    ) -> None:
        super().__init__(message, region=region, offset=offset)
        self.response = response


class RegionEmptyError(FabricError):
    """The region holds no usable design (empty, or left in ERROR by a failed program);
    ``path`` names a closed mapping of it."""

    def __init__(self, message: str, *, region: str | None = None, path: str | None = None) -> None:
        super().__init__(message, region=region)
        self.path = path


class WindowAttachError(FabricError):
    """The register window of a freshly programmed design could not be attached."""


class BackendError(FabricError):
    """A fabric backend resource (sysfs node, device file, tool, option) is missing or
    unusable; ``path`` names the resource, ``value`` an offending option value."""

    def __init__(
        self,
        message: str,
        *,
        region: str | None = None,
        design: str | None = None,
        path: str | None = None,
        value: Scalar = None,
    ) -> None:
        super().__init__(message, region=region, design=design, value=value)
        self.path = path


# -- services (services/: crypto, arith, audio reference services) ---------------------------


class KeyLengthError(ServiceArgumentError):
    """A cipher key has the wrong length (DES: 8 bytes; TDES: 16 or 24; AES-128: 16); ``value``
    is the length."""


class BlockSizeError(ServiceArgumentError):
    """A size is not a multiple of the cipher's block size (8 bytes for DES/TDES)."""


class BufferSizeError(ServiceArgumentError):
    """A size is negative or larger than the buffer it refers to."""


class OperandRangeError(ServiceArgumentError):
    """An operand is not an int in the 32-bit two's-complement range."""


class ServiceStateError(JuggleError, RuntimeError):
    """A service method was called in a state that does not allow it: ``service_id`` and
    ``region`` name the service and the region, ``method`` the method refused."""

    def __init__(
        self,
        message: str,
        *,
        service_id: int | None = None,
        region: str | None = None,
        method: str | None = None,
    ) -> None:
        super().__init__(message)
        self.service_id = service_id
        self.region = region
        self.method = method


class KeyNotLoadedError(ServiceStateError):
    """``encrypt``/``decrypt`` was called before ``load_key``."""


class CoreTimeoutError(FabricError):
    """A hardware core did not report done within the driver's polling budget."""


class HardwareFaultError(FabricError):
    """A hardware call failed (hung, raised, or returned a wrong result) and the service
    (``service_id``) has no software tier to serve it instead. The ``region`` is quarantined
    (ERROR) until :meth:`juggle.Framework.recover`."""

    def __init__(
        self, message: str, *, region: str | None = None, service_id: int | None = None
    ) -> None:
        super().__init__(message, region=region)
        self.service_id = service_id


# -- allocator (issue 3: tenants, priorities, preemption) ----------------------------------


class DuplicateTenantError(AllocatorError):
    """A tenant of that name is already registered."""


class TaskIndexError(AllocatorError):
    """The hardware task index is inconsistent (a device placed in a region it does not fit)."""


class DeviceStateError(AllocatorError):
    """The virtual device is not in a state that allows the call (already queued, running...)."""


class TimeOrderError(AllocatorError, ValueError):
    """An event is stamped earlier than one the allocator already processed; ``value`` is its
    time."""


class InterfaceError(AllocatorError, ValueError):
    """A virtual device interface got a bad register value or an oversized context."""


class UnknownActionError(AllocatorError):
    """A shell was asked to execute a value that is not an allocator action; ``value`` names
    its type."""


# -- hwthreads (ReconOS threads, delegates, OS objects) --------------------------------------


class WouldBlock(HardwareThreadError):
    """A non-blocking OS call (trylock, tryget, tryput, trywait) could not proceed at once;
    ``os_object`` names the mutex, semaphore or mailbox."""

    def __init__(self, message: str, *, os_object: str | None = None) -> None:
        super().__init__(message)
        self.os_object = os_object


class OsCallTimeoutError(HardwareThreadError, TimeoutError):
    """A blocking OS call, join or suspend did not complete within its timeout."""


class MutexOwnerError(HardwareThreadError):
    """A mutex was unlocked by a thread that does not own it, or relocked by its owner;
    ``os_object`` names the mutex (or condition)."""

    def __init__(self, message: str, *, os_object: str | None = None) -> None:
        super().__init__(message)
        self.os_object = os_object


class HandleError(HardwareThreadError, KeyError):
    """A thread used a resource ``handle`` its table lacks, or one naming the wrong kind of
    object."""

    def __init__(self, message: str, *, thread: str | None = None, handle: int | None = None):
        super().__init__(message, thread=thread)
        self.handle = handle

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ThreadStateError(HardwareThreadError):
    """A hardware-thread lifecycle transition is not legal from the thread's current state."""


class NoFreeSlotError(HardwareThreadError):
    """No hardware slot compatible with the thread is free; ``design`` names its design."""

    def __init__(self, message: str, *, design: str | None = None) -> None:
        super().__init__(message)
        self.design = design


class ThreadFailedError(HardwareThreadError):
    """A thread body raised; the original exception is the ``__cause__``."""


class HwThreadArgumentError(HardwareThreadError, ValueError):
    """An OS object or thread call got a bad argument (capacity, address, size)."""


# -- runtime tenancy (runtime/tenancy.py: the allocator arbitrates live calls, issue 3 item 9) --


class TenancyError(AllocatorError):
    """Errors of the live tenant arbiter (tenants sharing the fabric through virtual devices)."""


class ProgrammingModelError(TenancyError, ValueError):
    """A tenant's programming model is neither ``"native"`` nor ``"aware"``; ``value`` is
    it."""


class NotATenantError(TenancyError):
    """A consumer that is not a registered tenant asked for an arbitrated hardware service;
    ``consumer`` is the consumer name."""

    def __init__(self, message: str, *, consumer: str | None = None) -> None:
        super().__init__(message)
        self.consumer = consumer


class WaitSignal(TenancyError):
    """WAIT for an aware tenant: its device is not connected, so the call did not run.

    The request stays on the allocator's wait list (or its solution is under way); READY
    arrives on the tenant's signal channel, then the call can be made again. ``tenant`` and
    ``device`` name the device, ``service_id`` the service called.
    """

    def __init__(
        self,
        message: str,
        *,
        tenant: str | None = None,
        device: str | None = None,
        service_id: int | None = None,
    ) -> None:
        super().__init__(message, tenant=tenant, device=device)
        self.service_id = service_id


class DeviceWaitTimeoutError(TenancyError, TimeoutError):
    """A native tenant's call waited longer than the arbiter's bound for its device; the call
    did not run and a request still on the wait list was withdrawn."""


class TenancyClosedError(TenancyError):
    """The framework (and its tenant arbiter) was closed while a call waited or was made."""


# -- daemon (the juggle daemon, its protocol and its clients) --------------------------------


class DaemonError(JuggleError):
    """Errors of the juggle daemon, its protocol and its clients; ``tenant`` names the
    tenant concerned, ``path`` the socket, file or folder."""

    def __init__(self, message: str, *, tenant: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.tenant = tenant
        self.path = path


class AccessDeniedError(DaemonError, PermissionError):
    """The daemon refused: ``uid`` not mapped by the tenant policy, ``operation`` needs the
    admin group, or service outside the tenant's allowed services; or the socket (``path``)
    refused the client."""

    def __init__(
        self,
        message: str,
        *,
        uid: int | None = None,
        operation: str | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self.uid = uid
        self.operation = operation


class DaemonUnavailableError(DaemonError, ConnectionError):
    """No daemon listens on the socket (``path``), or the connection dropped. A call in
    flight when the connection dropped may or may not have run."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message, path=path)


class DaemonShuttingDownError(DaemonUnavailableError):
    """The daemon is shutting down: running calls finish, new ones are refused."""


class PolicyError(DaemonError, ConfigurationError):
    """The tenant policy file (``path``) does not parse or validate."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message, path=path)


class ProtocolError(DaemonError):
    """A frame is malformed, too large, of another protocol version, or names an unknown
    ``operation``; the daemon closes the connection that sent a malformed frame. ``value``
    is the offending value (a length, a version, a key)."""

    def __init__(self, message: str, *, operation: str | None = None, value: Scalar = None) -> None:
        super().__init__(message)
        self.operation = operation
        self.value = value


class QuotaExceededError(DaemonError):
    """A ``tenant`` exceeded its calls-per-second or services-held quota."""

    def __init__(self, message: str, *, tenant: str | None = None) -> None:
        super().__init__(message, tenant=tenant)


class RegionQuotaExceededError(QuotaExceededError):
    """A call would make a ``tenant`` hold (or wait for) more fabric regions at once than its
    ``max_regions`` quota. Releasing a proxy of an arbitrated service (``unget_service``)
    frees its region."""


class LimitExceededError(QuotaExceededError):
    """A request would take a ``tenant`` (None: the daemon as a whole) past one of the
    policy's ``[limits]`` (descriptors, connections, shared-memory segments, queued reply
    bytes, frame size): the request is refused (a connection over the limit gets this error
    and is closed) and nothing else changes. ``limit`` names the limit, ``value`` is its
    bound."""

    def __init__(
        self,
        message: str,
        *,
        tenant: str | None = None,
        limit: str | None = None,
        value: int | None = None,
    ) -> None:
        super().__init__(message, tenant=tenant)
        self.limit = limit
        self.value = value


class RemoteError(DaemonError):
    """The daemon raised an exception that is not a juggle error (or of a class the client
    does not know); ``remote_type`` names its class."""

    def __init__(self, message: str, *, remote_type: str = "") -> None:
        super().__init__(message)
        self.remote_type = remote_type


class CertificateError(DaemonError, ConfigurationError):
    """A TLS certificate, key or CA file (``path``) that cannot be read or used, a PKI
    request that cannot be done (a CA folder that holds one already, a certificate ``kind``
    or name ``value`` that is not allowed), or a TLS address (``value``) that is not
    ``HOST:PORT`` or cannot be bound. Nothing was written."""

    def __init__(self, message: str, *, path: str | None = None, value: Scalar = None) -> None:
        super().__init__(message, path=path)
        self.value = value


class DashboardError(DaemonError, ConfigurationError):
    """The daemon's dashboard cannot be served: a bad ``--dashboard`` address (``value``), a
    port it cannot bind, or an admin token file (``path``) that is unsafe or unreadable."""

    def __init__(self, message: str, *, path: str | None = None, value: Scalar = None) -> None:
        super().__init__(message, path=path)
        self.value = value


class SpinLimitError(DaemonError, ConfigurationError):
    """A spin bound (``spin_us`` of the client, ``--spin-us`` of the daemon) that is not a
    number of microseconds in 0..1000; ``value`` is it."""

    def __init__(self, message: str, *, value: Scalar = None) -> None:
        super().__init__(message)
        self.value = value


class UnsafePathError(DaemonError, ConfigurationError):
    """A file or folder (``path``) the daemon would trust is not safe to trust: owned by
    another uid, writable by its group or others, a symbolic link, not a regular file (a FIFO,
    a device), hard-linked elsewhere, or larger than its bound. Nothing was read from it or
    written to it."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message, path=path)


class DaemonIdentityError(DaemonError, PermissionError):
    """The process listening on the socket (``path``) is not the expected daemon: its uid
    (``SO_PEERCRED``) is not the one the client expects (root or the socket folder's owner by
    default, else ``daemon_uid`` / ``$JUGGLE_DAEMON_UID`` / ``--daemon-uid``); nothing was
    sent to it. ``uid`` is the uid found; ``value`` an expected uid that is no uid or user
    name."""

    def __init__(
        self,
        message: str,
        *,
        uid: int | None = None,
        path: str | None = None,
        value: Scalar = None,
    ) -> None:
        super().__init__(message, path=path)
        self.uid = uid
        self.value = value


class BusFaultError(FabricError):
    """A register access raised SIGBUS (a decoupled, reset or unmapped slot, or a file
    truncated under its mapping) at ``offset`` of the mapped file ``path``. A hardware fault
    the fault containment handles, not a crash."""

    def __init__(
        self,
        message: str,
        *,
        region: str | None = None,
        path: str | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message, region=region)
        self.path = path
        self.offset = offset


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
