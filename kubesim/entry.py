"""kubesim as the podherd command starts it: its options, its scenarios and the server. The server and the
scenarios' builder are imported when first called, so a command that only lists the scenarios (`podherd
--help`) does not load the simulator."""

from typing import TYPE_CHECKING, Any

from kubesim.options import PODHERD_IMAGE, SimOptions, podherd_image
from kubesim.scenarios import BUILTIN as SCENARIOS

if TYPE_CHECKING:
    from kubesim.scenario import resolve
    from kubesim.sim import serve_forever
else:

    def resolve(*args: Any, **kwargs: Any) -> Any:
        from kubesim.scenario import resolve as resolved

        return resolved(*args, **kwargs)

    async def serve_forever(*args: Any, **kwargs: Any) -> Any:
        from kubesim.sim import serve_forever as serve

        return await serve(*args, **kwargs)


__all__ = ["PODHERD_IMAGE", "SCENARIOS", "SimOptions", "podherd_image", "resolve", "serve_forever"]
