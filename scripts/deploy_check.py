"""The checks of deploy/compose.yaml and deploy/kubernetes/switchboard.yaml that a parser can
make (scripts/deploy-check.sh runs this): each failure names the file, the key and what it
must be. Argument: the ConfigMap's switchboard.toml, already written out."""

import re
import sys
import tomllib

import yaml

failures = []


def need(ok, where, what):
    if not ok:
        failures.append(f"{where}: {what}")


def grace(config_text):
    return tomllib.loads(config_text)["server"].get("shutdown_grace_seconds", 10)


def seconds(text):
    m = re.fullmatch(r"(\d+)s", str(text))
    return int(m.group(1)) if m else None


def compose():
    f = "deploy/compose.yaml"
    doc = yaml.safe_load(open(f))
    services = doc.get("services", {})
    shutdown = grace(open("deploy/switchboard.toml").read())
    replicas = {n: s for n, s in services.items() if n.startswith("switchboard-")}
    need(len(replicas) == 2, f, f"services: two switchboard-N replicas, found {sorted(replicas)}")
    need("postgres" in services, f, "services.postgres: the shared store")
    need("healthcheck" in services.get("postgres", {}), f, "services.postgres.healthcheck")
    proxy = services.get("proxy", {})
    need(proxy.get("image", "").startswith("caddy"), f, "services.proxy: Caddy, where TLS terminates")
    need("./Caddyfile:/etc/caddy/Caddyfile:ro" in proxy.get("volumes", []), f,
         "services.proxy.volumes: ./Caddyfile mounted at /etc/caddy/Caddyfile")
    hosts = set()
    for name, s in replicas.items():
        w = f"{f}: services.{name}"
        hosts.add(s.get("hostname"))
        need(s.get("command", [])[:1] == ["serve"], w, "command: serve …")
        need(s.get("env_file") == ["env/switchboard.env"], w,
             "env_file: [env/switchboard.env], the same secrets on every replica")
        opts = set(s.get("security_opt", []))
        for o in ["seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"]:
            need(o in opts, w, f"security_opt: {o} (bubblewrap's namespaces and /proc)")
        need("privileged" not in s and not s.get("cap_add"), w, "no privileged, no cap_add")
        need(s.get("cap_drop") == ["ALL"], w, "cap_drop: [ALL]")
        need(any(v.startswith("./switchboard.toml:/etc/switchboard/switchboard.toml")
                 for v in s.get("volumes", [])), w, "volumes: ./switchboard.toml mounted")
        stop = seconds(s.get("stop_grace_period"))
        need(stop is not None and stop > shutdown, w,
             f"stop_grace_period: above shutdown_grace_seconds ({shutdown})")
        need("ports" not in s, w, "no published port: only the proxy is reachable")
    need(len(hosts) == len(replicas) and None not in hosts, f,
         "each replica its own hostname (its replica id)")
    caddy = open("deploy/Caddyfile").read()
    for name in replicas:
        need(f"{name}:8080" in caddy, "deploy/Caddyfile", f"reverse_proxy names {name}:8080")
    need("health_uri /readyz" in caddy, "deploy/Caddyfile", "health_uri /readyz")
    need("flush_interval -1" in caddy, "deploy/Caddyfile", "flush_interval -1 (the SSE feed)")
    env = open("deploy/env/switchboard.env.example").read()
    for key in ["SWITCHBOARD_AGENT_TOKEN_SECRET", "SWITCHBOARD_INGRESS_TOKENS", "PGPASSWORD"]:
        need(re.search(rf"^{key}=", env, re.M), "deploy/env/switchboard.env.example", f"{key}=")


def kubernetes(configmap_toml):
    f = "deploy/kubernetes/switchboard.yaml"
    docs = {d["kind"]: d for d in yaml.safe_load_all(open(f))}
    for kind in ["Secret", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"]:
        need(kind in docs, f, f"a {kind}")
    if failures:
        return
    shutdown = grace(open(configmap_toml).read())
    dep = docs["Deployment"]["spec"]
    pod = dep["template"]["spec"]
    need(dep.get("replicas") == 2, f, "Deployment.spec.replicas: 2")
    need(pod.get("terminationGracePeriodSeconds", 30) > shutdown, f,
         f"terminationGracePeriodSeconds: above shutdown_grace_seconds ({shutdown})")
    need(pod.get("hostUsers") is False, f, "hostUsers: false (bubblewrap's user namespace)")
    c = pod["containers"][0]
    need(c.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/readyz", f,
         "readinessProbe on /readyz")
    need(c.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/healthz", f,
         "livenessProbe on /healthz")
    sc = c.get("securityContext", {})
    need(sc.get("procMount") == "Unmasked", f, "securityContext.procMount: Unmasked")
    need(sc.get("seccompProfile", {}).get("type") == "Unconfined", f, "seccompProfile Unconfined")
    need(sc.get("appArmorProfile", {}).get("type") == "Unconfined", f, "appArmorProfile Unconfined")
    need(sc.get("capabilities", {}).get("drop") == ["ALL"], f, "capabilities.drop: [ALL]")
    need(not sc.get("privileged") and not sc.get("capabilities", {}).get("add"), f,
         "not privileged, no capability added")
    need(sc.get("allowPrivilegeEscalation") is False, f, "allowPrivilegeEscalation: false")
    need(pod.get("securityContext", {}).get("runAsNonRoot") is True, f, "runAsNonRoot: true")
    secret = docs["Secret"].get("stringData", {})
    need("SWITCHBOARD_AGENT_TOKEN_SECRET" in secret, f,
         "Secret: SWITCHBOARD_AGENT_TOKEN_SECRET (one for every replica)")
    need({"secretRef": {"name": docs["Secret"]["metadata"]["name"]}} in c.get("envFrom", []), f,
         "the container's envFrom names the Secret")
    labels = dep["template"]["metadata"]["labels"]
    for kind in ["Service", "PodDisruptionBudget"]:
        sel = docs[kind]["spec"]["selector"]
        sel = sel.get("matchLabels", sel)
        need(all(labels.get(k) == v for k, v in sel.items()), f, f"{kind}'s selector matches the pods")
    need(docs["PodDisruptionBudget"]["spec"].get("minAvailable") == 1, f, "PodDisruptionBudget minAvailable: 1")


compose()
kubernetes(sys.argv[1])
if failures:
    print("\n".join(failures))
    sys.exit(1)
print("ok: compose.yaml, the Caddyfile, the env example and the manifests")
