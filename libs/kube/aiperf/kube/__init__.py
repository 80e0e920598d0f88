"""Kubernetes manifests of one run, as plain dicts (no API calls here).

`build_all(KubeSettings(name=..., total_workers=...), run_config)` returns the run's own
ServiceAccount (unless the settings name one), Role, RoleBinding, CURVE key Secret (without data;
`with_curve_keys` fills it), ConfigMap and JobSet to create, in that order; `to_yaml` renders
them. Other secrets only ever appear as Secret references; generation fails closed (`KubeConfigError`) when the run needs one that
is not mapped.
"""

from aiperf.kube.config_map import (
    CONFIG_KEY,
    CONFIG_PATH,
    build_config_map,
    cluster_run_config,
    require_secrets,
    run_config_json,
)
from aiperf.kube.curve_secret import build_curve_secret, with_curve_keys
from aiperf.kube.jobset import CONTROLLER_SERVICES, build_jobset
from aiperf.kube.layout import WorkerLayout
from aiperf.kube.manifests import build_all, check_no_secrets, secret_values_from_env, to_yaml
from aiperf.kube.names import config_map_name, controller_host, curve_secret_name, image, jobset_name
from aiperf.kube.rbac import RULES, build_role, build_role_binding, build_service_account
from aiperf.kube.settings import (
    DEFAULT_RESOURCES,
    ContainerResources,
    KubeConfigError,
    KubeSettings,
    SecretRef,
)

__all__ = [
    "CONFIG_KEY", "CONFIG_PATH", "CONTROLLER_SERVICES", "DEFAULT_RESOURCES", "RULES", "ContainerResources",
    "KubeConfigError", "KubeSettings", "SecretRef", "WorkerLayout", "build_all", "build_config_map",
    "build_curve_secret", "curve_secret_name", "with_curve_keys",
    "build_jobset", "build_role", "build_role_binding", "build_service_account", "check_no_secrets",
    "cluster_run_config",
    "config_map_name", "controller_host", "image", "jobset_name", "require_secrets", "run_config_json",
    "secret_values_from_env", "to_yaml",
]
