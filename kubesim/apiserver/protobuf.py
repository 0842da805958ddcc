"""Request bodies in Kubernetes' protobuf encoding, which kubectl sends for built-in types.

The envelope (k8s.io/apimachinery runtime/serializer/protobuf) is the magic `k8s\\0` and a
`runtime.Unknown`: TypeMeta (1: apiVersion, 2: kind) and the object's own message in field 2. Messages are
decoded by field number with the schemas below, taken from k8s.io/api's `generated.proto`, each the
`protobuf` of its kind (`kubesim.apiserver.kinds`); a type without a schema is refused 415, as for any
body kubesim cannot read.
"""

from __future__ import annotations

import base64
from typing import Any

from kubesim.apiserver.errors import bad_request, unsupported_media_type
from kubesim.apiserver.resources import Registry, Schema

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

# A message schema: field number -> (JSON name, kind, nested schema). Kinds: "string", "bool", "int",
# "message", "messages" (repeated), "map" (map<string,string>), "bytesmap" (map<string,bytes>, base64 in
# JSON), "quantities" (map<string,Quantity>), "strings" (repeated string), "intorstr" (IntOrString). Fields
# a schema does not name are left out.

OBJECT_META: Schema = {
    1: ("name", "string", None),
    2: ("generateName", "string", None),
    3: ("namespace", "string", None),
    11: ("labels", "map", None),
    12: ("annotations", "map", None),
}
LABEL_SELECTOR: Schema = {
    1: ("matchLabels", "map", None),
    2: (
        "matchExpressions",
        "messages",
        {1: ("key", "string", None), 2: ("operator", "string", None), 3: ("values", "strings", None)},
    ),
}
CONTAINER: Schema = {
    1: ("name", "string", None),
    2: ("image", "string", None),
    3: ("command", "strings", None),
    4: ("args", "strings", None),
    5: ("workingDir", "string", None),
    6: (
        "ports",
        "messages",
        {1: ("name", "string", None), 3: ("containerPort", "int", None), 4: ("protocol", "string", None)},
    ),
    7: ("env", "messages", {1: ("name", "string", None), 2: ("value", "string", None)}),
    8: ("resources", "message", {1: ("limits", "quantities", None), 2: ("requests", "quantities", None)}),
    13: ("terminationMessagePath", "string", None),
    14: ("imagePullPolicy", "string", None),
    20: ("terminationMessagePolicy", "string", None),
}
POD_SPEC: Schema = {
    2: ("containers", "messages", CONTAINER),
    3: ("restartPolicy", "string", None),
    4: ("terminationGracePeriodSeconds", "int", None),
    6: ("dnsPolicy", "string", None),
    7: ("nodeSelector", "map", None),
    8: ("serviceAccountName", "string", None),
    10: ("nodeName", "string", None),
    19: ("schedulerName", "string", None),
    20: ("initContainers", "messages", CONTAINER),
    24: ("priorityClassName", "string", None),
}
POD_TEMPLATE: Schema = {1: ("metadata", "message", OBJECT_META), 2: ("spec", "message", POD_SPEC)}
RESOURCE_ATTRIBUTES: Schema = {
    1: ("namespace", "string", None),
    2: ("verb", "string", None),
    3: ("group", "string", None),
    4: ("version", "string", None),
    5: ("resource", "string", None),
    6: ("subresource", "string", None),
    7: ("name", "string", None),
}
NON_RESOURCE_ATTRIBUTES: Schema = {1: ("path", "string", None), 2: ("verb", "string", None)}
JOB_SPEC: Schema = {
    1: ("parallelism", "int", None),
    2: ("completions", "int", None),
    3: ("activeDeadlineSeconds", "int", None),
    4: ("selector", "message", LABEL_SELECTOR),
    5: ("manualSelector", "bool", None),
    6: ("template", "message", POD_TEMPLATE),
    7: ("backoffLimit", "int", None),
    8: ("ttlSecondsAfterFinished", "int", None),
    9: ("completionMode", "string", None),
    10: ("suspend", "bool", None),
}
POLICY_RULES: Schema = {
    1: ("verbs", "strings", None),
    2: ("apiGroups", "strings", None),
    3: ("resources", "strings", None),
    4: ("resourceNames", "strings", None),
    5: ("nonResourceURLs", "strings", None),
}
BINDING: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: (
        "subjects",
        "messages",
        {
            1: ("kind", "string", None),
            2: ("apiGroup", "string", None),
            3: ("name", "string", None),
            4: ("namespace", "string", None),
        },
    ),
    3: (
        "roleRef",
        "message",
        {1: ("apiGroup", "string", None), 2: ("kind", "string", None), 3: ("name", "string", None)},
    ),
}
SERVICE_SPEC: Schema = {
    1: (
        "ports",
        "messages",
        {
            1: ("name", "string", None),
            2: ("protocol", "string", None),
            3: ("port", "int", None),
            4: ("targetPort", "intorstr", None),
            5: ("nodePort", "int", None),
            6: ("appProtocol", "string", None),
        },
    ),
    2: ("selector", "map", None),
    3: ("clusterIP", "string", None),
    4: ("type", "string", None),
    5: ("externalIPs", "strings", None),
    7: ("sessionAffinity", "string", None),
    10: ("externalName", "string", None),
    11: ("externalTrafficPolicy", "string", None),
    17: ("ipFamilyPolicy", "string", None),
    18: ("clusterIPs", "strings", None),
    19: ("ipFamilies", "strings", None),
    22: ("internalTrafficPolicy", "string", None),
}
SELF_SUBJECT_ACCESS_REVIEW: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: (
        "spec",
        "message",
        {
            1: ("resourceAttributes", "message", RESOURCE_ATTRIBUTES),
            2: ("nonResourceAttributes", "message", NON_RESOURCE_ATTRIBUTES),
        },
    ),
}
NAMESPACE: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: ("spec", "message", {1: ("finalizers", "strings", None)}),
}
CONFIG_MAP: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: ("data", "map", None),
    4: ("immutable", "bool", None),
}
DEPLOYMENT: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: (
        "spec",
        "message",
        {
            1: ("replicas", "int", None),
            2: ("selector", "message", LABEL_SELECTOR),
            3: ("template", "message", POD_TEMPLATE),
            4: (
                "strategy",
                "message",
                {
                    1: ("type", "string", None),
                    2: (
                        "rollingUpdate",
                        "message",
                        {1: ("maxUnavailable", "intorstr", None), 2: ("maxSurge", "intorstr", None)},
                    ),
                },
            ),
            5: ("minReadySeconds", "int", None),
            6: ("revisionHistoryLimit", "int", None),
            7: ("paused", "bool", None),
            9: ("progressDeadlineSeconds", "int", None),
        },
    ),
}
POD_DISRUPTION_BUDGET: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: (
        "spec",
        "message",
        {
            1: ("minAvailable", "intorstr", None),
            2: ("selector", "message", LABEL_SELECTOR),
            3: ("maxUnavailable", "intorstr", None),
            4: ("unhealthyPodEvictionPolicy", "string", None),
        },
    ),
}
TOKEN_REQUEST: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: (
        "spec",
        "message",
        {1: ("audiences", "strings", None), 4: ("expirationSeconds", "int", None)},
    ),
}
SELF_SUBJECT_REVIEW: Schema = {1: ("metadata", "message", OBJECT_META)}
SECRET: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: ("data", "bytesmap", None),
    3: ("type", "string", None),
    4: ("stringData", "map", None),
    5: ("immutable", "bool", None),
}
SERVICE_ACCOUNT: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: ("secrets", "messages", {2: ("namespace", "string", None), 3: ("name", "string", None)}),
    3: ("imagePullSecrets", "messages", {1: ("name", "string", None)}),
    4: ("automountServiceAccountToken", "bool", None),
}
SERVICE: Schema = {1: ("metadata", "message", OBJECT_META), 2: ("spec", "message", SERVICE_SPEC)}
JOB: Schema = {1: ("metadata", "message", OBJECT_META), 2: ("spec", "message", JOB_SPEC)}
CRON_JOB: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: (
        "spec",
        "message",
        {
            1: ("schedule", "string", None),
            2: ("startingDeadlineSeconds", "int", None),
            3: ("concurrencyPolicy", "string", None),
            4: ("suspend", "bool", None),
            5: (
                "jobTemplate",
                "message",
                {1: ("metadata", "message", OBJECT_META), 2: ("spec", "message", JOB_SPEC)},
            ),
            6: ("successfulJobsHistoryLimit", "int", None),
            7: ("failedJobsHistoryLimit", "int", None),
            8: ("timeZone", "string", None),
        },
    ),
}
ROLE: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: ("rules", "messages", POLICY_RULES),
}
PRIORITY_CLASS: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: ("value", "int", None),
    3: ("globalDefault", "bool", None),
    4: ("description", "string", None),
    5: ("preemptionPolicy", "string", None),
}
SELF_SUBJECT_RULES_REVIEW: Schema = {
    1: ("metadata", "message", OBJECT_META),
    2: ("spec", "message", {1: ("namespace", "string", None)}),
}
# A message sent to a subresource, not a resource's own kind.
SUBRESOURCE_KINDS: dict[tuple[str, str], Schema] = {
    ("authentication.k8s.io/v1", "TokenRequest"): TOKEN_REQUEST
}


def decode(body: bytes, registry: Registry) -> dict[str, Any]:
    """A protobuf request body as the JSON object it stands for: the message of its kind, as the kind is
    served (`ResourceType.protobuf`)."""
    if not body.startswith(MAGIC):
        raise bad_request("the protobuf body does not start with the Kubernetes magic number")
    envelope = _fields(body[len(MAGIC) :])
    type_meta = _fields(envelope.get(1, [b""])[0])
    api_version = type_meta.get(1, [b""])[0].decode()
    kind = type_meta.get(2, [b""])[0].decode()
    rt = registry.by_kind(api_version, kind)
    schema = rt.protobuf if rt is not None else SUBRESOURCE_KINDS.get((api_version, kind))
    if schema is None:
        raise unsupported_media_type(f"{CONTENT_TYPE} for {kind or 'an unknown kind'}")
    return {
        "apiVersion": api_version,
        "kind": kind,
        **_omit_empty(_message(envelope.get(2, [b""])[0], schema)),
    }


# Go's protobuf encoding writes a non-pointer field even when it holds its zero value; the JSON the API
# server would answer with omits those (`omitempty`). Integers stay, except the non-pointer ones whose
# zero means unset.
_ZERO_INTS = frozenset({"minReadySeconds", "hostPort", "nodePort"})


def _omit_empty(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: _omit_empty(v) for k, v in value.items()}
        return {
            k: v
            for k, v in kept.items()
            if not (
                v == "" or v is False or v is None or (v == 0 and k in _ZERO_INTS and not isinstance(v, bool))
            )
        }
    if isinstance(value, list):
        return [_omit_empty(v) for v in value]
    return value


def _message(data: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, values in _fields(data).items():
        if number not in schema:
            continue
        name, kind, nested = schema[number]
        if kind == "string":
            out[name] = bytes(values[-1]).decode()
        elif kind == "bool":
            out[name] = bool(values[-1])
        elif kind == "int":
            out[name] = int(values[-1])
        elif kind == "strings":
            out[name] = [bytes(v).decode() for v in values]
        elif kind in ("map", "quantities", "bytesmap"):  # a Quantity is a message holding its string (1)
            entries = [_fields(bytes(v)) for v in values]
            out[name] = {e.get(1, [b""])[0].decode(): _map_value(e.get(2, [b""])[0], kind) for e in entries}
        elif kind == "intorstr":  # IntOrString: type (0 int, 1 string), intVal, strVal
            parts = _fields(bytes(values[-1]))
            out[name] = parts.get(3, [b""])[0].decode() if parts.get(1, [0])[0] == 1 else parts.get(2, [0])[0]
        elif kind == "message" and nested is not None:
            out[name] = _message(bytes(values[-1]), nested)
        elif kind == "messages" and nested is not None:
            out[name] = [_message(bytes(v), nested) for v in values]
    return out


def _map_value(raw: bytes, kind: str) -> str:
    if kind == "bytesmap":
        return base64.b64encode(bytes(raw)).decode()
    if kind == "quantities":
        return bytes(_fields(bytes(raw)).get(1, [b""])[0]).decode()
    return bytes(raw).decode()


def _fields(data: bytes) -> dict[int, list[Any]]:
    """The wire format: each field number with its values (varints as ints, length-delimited as bytes)."""
    fields: dict[int, list[Any]] = {}
    position = 0
    while position < len(data):
        key, position = _varint(data, position)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, position = _varint(data, position)
        elif wire == 2:
            length, position = _varint(data, position)
            value, position = data[position : position + length], position + length
        elif wire == 1:
            value, position = data[position : position + 8], position + 8
        elif wire == 5:
            value, position = data[position : position + 4], position + 4
        else:
            raise bad_request(f"the protobuf body has an unknown wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _varint(data: bytes, position: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if position >= len(data):
            raise bad_request("the protobuf body ends inside a varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, position
        shift += 7
