"""``juggle module validate``: every install-time check, in a throwaway framework."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from juggle.runtime.framework import Framework


def validate_module(path: str | Path, *, fabric: str = "xupv2p") -> dict[str, Any]:
    """Check the module at ``path`` against board ``fabric`` without touching any runtime.

    Raises what :meth:`Framework.install` raises, naming the bad value.
    """
    with Framework(fabric) as fw:
        module = fw.install(path)
        services = []
        for resolved in module.resolved:
            spec = resolved["spec"]
            hardware = resolved["hardware"]
            services.append(
                {
                    "interfaces": list(spec.interfaces),
                    "tiers": list(spec.tiers()),
                    "properties": dict(spec.properties),
                    "bitstreams": {
                        region: {"design": bs.design, "part": bs.part, "bytes": bs.size}
                        for region, (bs, _) in (hardware.bitstreams.items() if hardware else ())
                    },
                }
            )
        return {
            "name": module.name,
            "version": module.version,
            "format": module.descriptor.format,
            "services": services,
            "valid": True,
        }
