"""kubesim as the podherd command starts it: its options, its scenarios and the server."""

from kubesim.options import PODHERD_IMAGE, SimOptions, podherd_image
from kubesim.scenario import resolve
from kubesim.scenarios import BUILTIN as SCENARIOS
from kubesim.sim import serve_forever

__all__ = ["PODHERD_IMAGE", "SCENARIOS", "SimOptions", "podherd_image", "resolve", "serve_forever"]
