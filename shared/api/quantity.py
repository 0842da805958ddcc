"""Kubernetes resource quantities ("500m", "2", "1Gi", "1.5G") as exact integers of milli-units."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_CACHE: dict[str, int] = {}


def milli(value: str | int | float) -> int:
    """The quantity in thousandths of its unit, rounded up as Kubernetes rounds ("1m" -> 1, "1" -> 1000)."""
    if isinstance(value, int | float):
        return int(Decimal(str(value)) * 1000)
    cached = _CACHE.get(value)
    if cached is not None:
        return cached
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"invalid quantity {value!r}")
    try:
        number = Decimal(match.group(1)) * _SUFFIX[match.group(2) or ""] * 1000
    except InvalidOperation as exc:
        raise ValueError(f"invalid quantity {value!r}") from exc
    result = int(number.to_integral_value(rounding="ROUND_CEILING"))
    if len(_CACHE) < 10_000:
        _CACHE[value] = result
    return result


def format_milli(value: int, resource: str) -> str:
    """A readable quantity: cpu in cores or millicores, memory in Mi/Gi, counts as integers."""
    if resource == "cpu":
        return f"{value // 1000}" if value % 1000 == 0 else f"{value}m"
    whole = value // 1000
    if resource in ("memory", "ephemeral-storage"):
        for suffix, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
    return str(whole)


def pod_requests(spec: dict[str, object]) -> dict[str, int]:
    """Effective requests of a pod spec: the sum over containers, at least the largest init container,
    plus overhead (as the scheduler computes them), in milli-units. Every pod also takes one `pods` slot."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or []:  # type: ignore[attr-defined]
        for name, quantity in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = total.get(name, 0) + milli(quantity)
    for container in spec.get("initContainers") or []:  # type: ignore[attr-defined]
        for name, quantity in ((container.get("resources") or {}).get("requests") or {}).items():
            total[name] = max(total.get(name, 0), milli(quantity))
    for name, quantity in (spec.get("overhead") or {}).items():  # type: ignore[attr-defined]
        total[name] = total.get(name, 0) + milli(quantity)
    total["pods"] = 1000
    return total
