"""What kube-apiserver checks and fills in before it stores an object, for the fake's store.

- The body against the URL: apiVersion (400) and kind (CRs: 422 `kind: Invalid value`).
- Metadata: names per kind (DNS-1123 subdomain or label, DNS-1035 label for Services, path
  segment names for RBAC objects), label and annotation keys and values, finalizer names,
  owner references (apiVersion, kind, name, uid required; one controller at most); empty
  `labels`, `annotations`, `finalizers`, `ownerReferences` are dropped as Go's `omitempty` does.
- Built-in kinds: the server-side defaults of Pods, Services, Jobs, Secrets and Namespaces, a
  few required fields, immutable Pod and Job fields on update.
- events.k8s.io/v1 Events, stored as core/v1 Events and converted both ways.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from typing import Any

from aiperf.testing.fake_kube_api import ApiError, FieldError, KindInfo, Obj

_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                 "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
                 "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_1123_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
                  "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
                  "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
LABEL_1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                  "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
                  "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
_QUALIFIED_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                  "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                  "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                    "'my_value',  or '12345', regex used for validation is "
                    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")
_TOTAL_ANNOTATIONS = 256 * 1024
_RBAC_KINDS = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")


# -- body against the URL -------------------------------------------------------------------------

def check_type_meta(info: KindInfo, body: Obj, name: str) -> None:
    """A body whose apiVersion or kind names another type is refused, as the apiserver's decoder
    does: 400 for the apiVersion, 422 (custom resources) or 400 (built-ins) for the kind."""
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if api_version and api_version != info.api_version:
        raise ApiError.bad_request(f"the API version in the data ({api_version}) does not match the expected "
                                   f"API version ({info.api_version})")
    if kind and kind != info.kind:
        if info.builtin:
            raise ApiError.bad_request(f"the kind in the data ({kind}) does not match the expected kind "
                                       f"({info.kind})")
        raise ApiError(422, "Invalid", f'{kind}.{info.group} "{name}" is invalid: kind: Invalid value: "{kind}": '
                       f"must be {info.kind}", info=info, name=name,
                       causes=[FieldError("Invalid", "kind", f"must be {info.kind}", kind).cause()])


# -- metadata -------------------------------------------------------------------------------------

def name_errors(info: KindInfo, name: str, path: str = "metadata.name") -> list[FieldError]:
    """The name rule of `info`'s kind, as `metadata.name` errors."""
    if info.kind in _RBAC_KINDS or info.plural == "customresourcedefinitions":
        for bad, why in ((".", "may not be '.'"), ("..", "may not be '..'")):
            if name == bad:
                return [FieldError("Invalid", path, why, name)]
        for char in ("/", "%"):
            if char in name:
                return [FieldError("Invalid", path, f"may not contain '{char}'", name)]
        return []
    if info.kind == "Namespace":
        return _dns(name, path, _LABEL_1123, LABEL_1123_MSG, 63)
    if info.kind == "Service" and info.group == "":
        return _dns(name, path, _LABEL_1035, LABEL_1035_MSG, 63)
    return _dns(name, path, _SUBDOMAIN, SUBDOMAIN_MSG, 253)


def _dns(name: str, path: str, pattern: re.Pattern[str], message: str, limit: int) -> list[FieldError]:
    errors = []
    if len(name) > limit:
        errors.append(FieldError("Invalid", path, f"must be no more than {limit} characters", name))
    if not pattern.match(name):
        errors.append(FieldError("Invalid", path, message, name))
    return errors


def _qualified_name_errors(key: str, path: str) -> list[FieldError]:
    prefix, slash, name = key.rpartition("/")
    errors = []
    if slash and not prefix:
        errors.append(FieldError("Invalid", path, "prefix part must be non-empty", key))
    elif prefix and (len(prefix) > 253 or not _SUBDOMAIN.match(prefix)):
        errors.append(FieldError("Invalid", path, "prefix part " + SUBDOMAIN_MSG, key))
    if not name:
        errors.append(FieldError("Invalid", path, "name part must be non-empty", key))
    else:
        if len(name) > 63:
            errors.append(FieldError("Invalid", path, "name part must be no more than 63 characters", key))
        if not _QUALIFIED_NAME.match(name):
            errors.append(FieldError("Invalid", path, _QUALIFIED_MSG, key))
    return errors


def check_meta_types(meta: Any) -> None:
    """Wrong JSON types in ObjectMeta fail decoding (400), before any validation."""
    if not isinstance(meta, dict):
        raise ApiError.bad_request("json: cannot unmarshal into Go struct field Object.metadata of type "
                                   "v1.ObjectMeta")
    for key in ("labels", "annotations"):
        value = meta.get(key)
        if value is None:
            continue
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ApiError.bad_request(f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                                       f"ObjectMeta.metadata.{key} of type string")
    for key in ("finalizers", "ownerReferences"):
        value = meta.get(key)
        if value is not None and not isinstance(value, list):
            raise ApiError.bad_request(f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                                       f"ObjectMeta.metadata.{key} of type []")


def _json_kind(value: Any) -> str:
    if isinstance(value, dict):
        bad = next((v for v in value.values() if not isinstance(v, str)), None)
        return "number" if isinstance(bad, int | float) and not isinstance(bad, bool) else (
            "bool" if isinstance(bad, bool) else "object" if isinstance(bad, dict) else "array")
    return "string" if isinstance(value, str) else "number" if isinstance(value, int | float) else "object"


def meta_errors(info: KindInfo, meta: Obj) -> list[FieldError]:
    """Labels, annotations, finalizers and owner references of `meta`."""
    errors: list[FieldError] = []
    for key, value in (meta.get("labels") or {}).items():
        errors.extend(_qualified_name_errors(key, "metadata.labels"))
        if len(value) > 63:
            errors.append(FieldError("Invalid", "metadata.labels", "must be no more than 63 characters", value))
        if not _LABEL_VALUE.match(value):
            errors.append(FieldError("Invalid", "metadata.labels", _LABEL_VALUE_MSG, value))
    annotations = meta.get("annotations") or {}
    for key in annotations:
        errors.extend(_qualified_name_errors(key.lower(), "metadata.annotations"))
    if sum(len(k) + len(v) for k, v in annotations.items()) > _TOTAL_ANNOTATIONS:
        errors.append(FieldError("TooLong", "metadata.annotations", f"must have at most {_TOTAL_ANNOTATIONS} "
                                 "bytes"))
    for i, finalizer in enumerate(meta.get("finalizers") or []):
        if not isinstance(finalizer, str):
            errors.append(FieldError("Invalid", f"metadata.finalizers[{i}]", "must be a string", finalizer))
        else:
            errors.extend(_qualified_name_errors(finalizer, f"metadata.finalizers[{i}]"))
    controllers = []
    for ref in meta.get("ownerReferences") or []:
        ref = ref if isinstance(ref, dict) else {}
        for key, what in (("apiVersion", "version"), ("kind", "kind"), ("name", "name"), ("uid", "uid")):
            if not ref.get(key):
                errors.append(FieldError("Invalid", f"metadata.ownerReferences.{key}", f"{what} must not be empty",
                                         ref.get(key) or ""))
        if ref.get("apiVersion") and "/" not in ref["apiVersion"] and ref["apiVersion"] != "v1" and \
                not re.match(r"^v\d", ref["apiVersion"]):
            errors.append(FieldError("Invalid", "metadata.ownerReferences.apiVersion",
                                     "version must not be empty", ref["apiVersion"]))
        if ref.get("controller") is True:
            controllers.append(ref.get("name", ""))
    if len(controllers) > 1:
        errors.append(FieldError("Invalid", "metadata.ownerReferences", "Only one reference can have Controller "
                                 f"set to true. Found \"true\" in references for {' and '.join(controllers)}",
                                 meta.get("ownerReferences")))
    return errors


def drop_empty_meta(obj: Obj) -> None:
    """Empty maps and lists in metadata are not stored (Go's `omitempty`)."""
    meta = obj.get("metadata") or {}
    for key in ("labels", "annotations", "finalizers", "ownerReferences", "managedFields"):
        if key in meta and not meta[key]:
            del meta[key]


# -- built-in kinds ---------------------------------------------------------------------------------

def default_builtin(info: KindInfo, obj: Obj, *, cluster_ip: str) -> None:
    """Server-side defaults of a new built-in object (what `kubectl get -o yaml` shows after)."""
    if info.group == "" and info.kind == "Pod":
        spec = obj.setdefault("spec", {})
        _default_pod_spec(spec)
        spec.setdefault("serviceAccountName", spec.get("serviceAccount") or "default")
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        spec.setdefault("priority", 0)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        tolerations = spec.setdefault("tolerations", [])
        for taint in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(t.get("key") == taint for t in tolerations):
                tolerations.append({"key": taint, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 300})
        obj["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}
    elif info.group == "" and info.kind == "Service":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("clusterIP") != "None" and spec["type"] != "ExternalName":
            spec.setdefault("clusterIP", cluster_ip)
        if "clusterIP" in spec:
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        obj["status"] = {"loadBalancer": {}}
    elif info.group == "batch" and info.kind == "Job":
        spec = obj.setdefault("spec", {})
        if spec.get("completions") is None and spec.get("parallelism") is None:
            spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        if not spec.get("podFailurePolicy"):
            spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        uid, name = obj["metadata"]["uid"], obj["metadata"]["name"]
        if not spec.get("manualSelector"):
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
            labels.update({"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                           "controller-uid": uid, "job-name": name})
        _default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}), restart_policy=None)
    elif info.group == "" and info.kind == "Secret":
        obj.setdefault("type", "Opaque")
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict):
            data = obj.setdefault("data", {})
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
    elif info.group == "" and info.kind == "Namespace":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        obj["status"] = {"phase": "Active"}


def _default_pod_spec(spec: Obj, restart_policy: str | None = "Always") -> None:
    if restart_policy:
        spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            image = str(container.get("image") or "")
            tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
            latest = not tagged or image.endswith(":latest")
            container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("resources", {})
            for port in container.get("ports") or []:
                port.setdefault("protocol", "TCP")
            for env in container.get("env") or []:
                field_ref = (env.get("valueFrom") or {}).get("fieldRef")
                if isinstance(field_ref, dict):
                    field_ref.setdefault("apiVersion", "v1")


def _qos_class(spec: Obj) -> str:
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(
        set(r.get("limits") or {}) >= {"cpu", "memory"}
        and all((r.get("requests") or r.get("limits") or {}).get(k) == (r.get("limits") or {}).get(k)
                for k in ("cpu", "memory"))
        for r in resources)
    return "Guaranteed" if guaranteed else "Burstable"


def builtin_errors(info: KindInfo, obj: Obj) -> list[FieldError]:
    """Required fields of the built-in kinds the fake checks."""
    errors: list[FieldError] = []
    if info.group == "" and info.kind == "Pod":
        errors.extend(_pod_spec_errors(obj.get("spec") or {}, "spec"))
    elif info.group == "batch" and info.kind == "Job":
        template = (obj.get("spec") or {}).get("template") or {}
        pod_spec = template.get("spec") or {}
        errors.extend(_pod_spec_errors(pod_spec, "spec.template.spec"))
        if pod_spec.get("restartPolicy") not in ("OnFailure", "Never"):
            errors.append(FieldError("Required", "spec.template.spec.restartPolicy",
                                     'valid values: "OnFailure", "Never"'))
    elif info.group == "events.k8s.io" and info.kind == "Event":
        for key in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
            if not obj.get(key):
                errors.append(FieldError("Required", key))
        if obj.get("type") not in ("Normal", "Warning"):
            errors.append(FieldError("Invalid", "type", "has invalid value: " + str(obj.get("type")),
                                     obj.get("type") or ""))
        if len(str(obj.get("note") or "")) > 1024:
            errors.append(FieldError("TooLong", "note", "may not be more than 1024 bytes"))
    return errors


def _pod_spec_errors(spec: Obj, path: str) -> list[FieldError]:
    errors: list[FieldError] = []
    containers = spec.get("containers") or []
    if not containers:
        errors.append(FieldError("Required", f"{path}.containers"))
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or []):
            where = f"{path}.{key}[{i}]"
            name = container.get("name") if isinstance(container, dict) else None
            if not name:
                errors.append(FieldError("Required", f"{where}.name"))
            else:
                errors.extend(_dns(name, f"{where}.name", _LABEL_1123, LABEL_1123_MSG, 63))
                if name in names:
                    errors.append(FieldError("Duplicate", f"{where}.name", "", name))
                names.add(name)
            if isinstance(container, dict) and not container.get("image"):
                errors.append(FieldError("Required", f"{where}.image"))
    return errors


_POD_UPDATE_MSG = ("pod updates may not change fields other than `spec.containers[*].image`,"
                   "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                   "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
                   "to 1 if it was previously negative)")


def update_errors(info: KindInfo, old: Obj, new: Obj) -> list[FieldError]:
    """Immutable fields of built-in kinds: a Pod's spec (but images, activeDeadlineSeconds,
    added tolerations), a Job's selector and pod template."""
    if info.group == "" and info.kind == "Pod":
        old_spec, new_spec = old.get("spec") or {}, copy.deepcopy(new.get("spec") or {})
        for key in ("containers", "initContainers"):
            olds = old_spec.get(key) or []
            for i, container in enumerate(new_spec.get(key) or []):
                if i < len(olds) and isinstance(container, dict):
                    container["image"] = olds[i].get("image")
        if "activeDeadlineSeconds" in old_spec or "activeDeadlineSeconds" in new_spec:
            new_spec["activeDeadlineSeconds"] = old_spec.get("activeDeadlineSeconds")
            if new_spec["activeDeadlineSeconds"] is None:
                del new_spec["activeDeadlineSeconds"]
        old_tolerations = old_spec.get("tolerations") or []
        if all(t in (new_spec.get("tolerations") or []) for t in old_tolerations):
            new_spec["tolerations"] = old_tolerations
            if "tolerations" not in old_spec:
                del new_spec["tolerations"]
        if json.dumps(new_spec, sort_keys=True) != json.dumps(old_spec, sort_keys=True):
            return [FieldError("Forbidden", "spec", _POD_UPDATE_MSG)]
    elif info.group == "batch" and info.kind == "Job":
        errors = []
        for key in ("selector", "template"):
            if (old.get("spec") or {}).get(key) != (new.get("spec") or {}).get(key):
                errors.append(FieldError("Invalid", f"spec.{key}", "field is immutable",
                                         (new.get("spec") or {}).get(key)))
        return errors
    return []


# -- events.k8s.io/v1 <-> core/v1 Events ------------------------------------------------------------

_EVENT_FIELDS = (("note", "message"), ("regarding", "involvedObject"), ("related", "related"),
                 ("reportingController", "reportingComponent"), ("reportingInstance", "reportingInstance"),
                 ("deprecatedSource", "source"), ("deprecatedFirstTimestamp", "firstTimestamp"),
                 ("deprecatedLastTimestamp", "lastTimestamp"), ("deprecatedCount", "count"),
                 ("series", "series"), ("action", "action"), ("reason", "reason"), ("type", "type"),
                 ("eventTime", "eventTime"))


def event_to_core(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event as the core/v1 Event it is stored as."""
    out: Obj = {"apiVersion": "v1", "kind": "Event", "metadata": event.get("metadata") or {}}
    for new, core in _EVENT_FIELDS:
        if new in event:
            out[core] = event[new]
    return out


def event_from_core(event: Obj) -> Obj:
    """A stored core/v1 Event as events.k8s.io/v1 shows it."""
    out: Obj = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": event.get("metadata") or {}}
    for new, core in _EVENT_FIELDS:
        if core in event:
            out[new] = event[core]
    return out
