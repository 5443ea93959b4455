package main

import (
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The Kubernetes example in deploy/kubernetes is decoded with the real
// Kubernetes API types (k8s.io/api) in strict mode: sigs.k8s.io/yaml's
// UnmarshalStrict turns YAML into JSON, refusing duplicate keys, and
// decodes it with unknown fields disallowed, so a mistyped field fails.
// adr/0015-kubernetes-manifest-validation.md records why.

// k8sManifests are the decoded objects of deploy/kubernetes, by kind.
type k8sManifests struct {
	deployments []*appsv1.Deployment
	services    []*corev1.Service
	pdbs        []*policyv1.PodDisruptionBudget
	secrets     map[string]*corev1.Secret
	configMaps  map[string]*corev1.ConfigMap
}

// docSeparator splits a multi-document YAML stream.
var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeK8sManifest decodes one YAML document strictly into the API type
// its apiVersion and kind name; other kinds are an error.
func decodeK8sManifest(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + "/" + tm.Kind {
	case "apps/v1/Deployment":
		obj = &appsv1.Deployment{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "policy/v1/PodDisruptionBudget":
		obj = &policyv1.PodDisruptionBudget{}
	case "v1/Secret":
		obj = &corev1.Secret{}
	case "v1/ConfigMap":
		obj = &corev1.ConfigMap{}
	default:
		return nil, fmt.Errorf("apiVersion %q kind %q: not a kind this test knows", tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	return obj, nil
}

// loadK8sManifests decodes every document of every *.yaml file in dir.
func loadK8sManifests(t *testing.T, dir string) k8sManifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("%s holds no *.yaml", dir)
	}
	m := k8sManifests{secrets: map[string]*corev1.Secret{}, configMaps: map[string]*corev1.ConfigMap{}}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSeparator.Split(string(data), -1) {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err == nil && tm.Kind == "" && tm.APIVersion == "" {
				continue // only comments
			}
			obj, err := decodeK8sManifest([]byte(doc))
			if err != nil {
				t.Errorf("%s, document %d: %v", file, i+1, err)
				continue
			}
			switch o := obj.(type) {
			case *appsv1.Deployment:
				m.deployments = append(m.deployments, o)
			case *corev1.Service:
				m.services = append(m.services, o)
			case *policyv1.PodDisruptionBudget:
				m.pdbs = append(m.pdbs, o)
			case *corev1.Secret:
				m.secrets[o.Name] = o
			case *corev1.ConfigMap:
				m.configMaps[o.Name] = o
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return m
}

// secretValue returns key of the Secret name, from data or stringData.
func (m k8sManifests) secretValue(name, key string) (string, bool) {
	s, ok := m.secrets[name]
	if !ok {
		return "", false
	}
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	v, ok := s.Data[key]
	return string(v), ok
}

// TestDeployKubernetesManifests decodes deploy/kubernetes strictly with
// the k8s.io/api types and checks the example holds together: 3 server
// replicas with /healthz and /readyz probes, agents, a Service and a
// PodDisruptionBudget that select the server pods, every Secret and
// ConfigMap reference resolvable, and every container's vigil command
// line parsed by the real command tree and loaded, with the ConfigMap's
// file as --config and the Secret's values as VIGIL_* env, by the real
// config loader.
func TestDeployKubernetesManifests(t *testing.T) {
	m := loadK8sManifests(t, filepath.Join(deployDir, "kubernetes"))

	byCommand := map[string]*appsv1.Deployment{}
	for _, d := range m.deployments {
		if len(d.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("Deployment %s: want one container", d.Name)
		}
		c := d.Spec.Template.Spec.Containers[0]
		if len(c.Args) == 0 {
			t.Fatalf("Deployment %s: container %s has no args", d.Name, c.Name)
		}
		byCommand[c.Args[0]] = d
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Deployment %s: selector %v does not match its pod labels %v (%v)", d.Name, d.Spec.Selector, d.Spec.Template.Labels, err)
		}
		t.Run(d.Name, func(t *testing.T) { checkVigilContainer(t, m, d) })
	}

	server, agent := byCommand["server"], byCommand["agent"]
	if server == nil || agent == nil {
		t.Fatalf("want a Deployment running vigil server and one running vigil agent, have %v", slices.Collect(maps.Keys(byCommand)))
	}
	if server.Spec.Replicas == nil || *server.Spec.Replicas != 3 {
		t.Errorf("Deployment %s: replicas %v, want 3", server.Name, server.Spec.Replicas)
	}
	sc := server.Spec.Template.Spec.Containers[0]
	for name, probe := range map[string]struct {
		p    *corev1.Probe
		path string
	}{"livenessProbe": {sc.LivenessProbe, "/healthz"}, "readinessProbe": {sc.ReadinessProbe, "/readyz"}} {
		if probe.p == nil || probe.p.HTTPGet == nil || probe.p.HTTPGet.Path != probe.path {
			t.Errorf("Deployment %s: %s must GET %s, have %+v", server.Name, name, probe.path, probe.p)
			continue
		}
		if !hasContainerPort(sc, probe.p.HTTPGet.Port.String()) {
			t.Errorf("Deployment %s: %s port %s is no port of the container", server.Name, name, probe.p.HTTPGet.Port.String())
		}
	}
	serverPods := labels.Set(server.Spec.Template.Labels)

	if len(m.services) != 1 {
		t.Fatalf("want one Service, have %d", len(m.services))
	}
	svc := m.services[0]
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(serverPods) || labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(agent.Spec.Template.Labels)) {
		t.Errorf("Service %s: selector %v must select the server pods and not the agents", svc.Name, svc.Spec.Selector)
	}
	for _, p := range svc.Spec.Ports {
		if !hasContainerPort(sc, p.TargetPort.String()) {
			t.Errorf("Service %s: targetPort %s is no port of the server container", svc.Name, p.TargetPort.String())
		}
	}

	if len(m.pdbs) != 1 {
		t.Fatalf("want one PodDisruptionBudget, have %d", len(m.pdbs))
	}
	pdb := m.pdbs[0]
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(serverPods) {
		t.Errorf("PodDisruptionBudget %s: selector %v does not select the server pods (%v)", pdb.Name, pdb.Spec.Selector, err)
	}
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 2 || pdb.Spec.MinAvailable.IntValue() >= 3 {
		t.Errorf("PodDisruptionBudget %s: minAvailable %v, want 2 of the 3 replicas", pdb.Name, pdb.Spec.MinAvailable)
	}
}

// hasContainerPort reports whether port (a name or a number) is a port of c.
func hasContainerPort(c corev1.Container, port string) bool {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return true
		}
	}
	return false
}

// checkVigilContainer resolves the Deployment's Secret and ConfigMap
// references and loads its container's vigil command line: the --config
// file comes from the ConfigMap mounted at its directory, VIGIL_* env
// from the Secret's values, $(VAR) references from the container's env.
func checkVigilContainer(t *testing.T, m k8sManifests, d *appsv1.Deployment) {
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]

	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
		switch {
		case v.Secret != nil:
			for _, it := range v.Secret.Items {
				if _, ok := m.secretValue(v.Secret.SecretName, it.Key); !ok {
					t.Errorf("volume %s: Secret %s has no key %s", v.Name, v.Secret.SecretName, it.Key)
				}
			}
		case v.ConfigMap != nil:
			cm := m.configMaps[v.ConfigMap.Name]
			for _, it := range v.ConfigMap.Items {
				if _, ok := cm.Data[it.Key]; cm == nil || !ok {
					t.Errorf("volume %s: ConfigMap %s has no key %s", v.Name, v.ConfigMap.Name, it.Key)
				}
			}
		}
	}
	// fileAt returns the content a path in the container has, from a
	// Secret or ConfigMap volume item mounted there.
	fileAt := func(p string) (string, bool) {
		for _, vm := range c.VolumeMounts {
			rel, ok := strings.CutPrefix(p, strings.TrimSuffix(vm.MountPath, "/")+"/")
			if !ok {
				continue
			}
			v := volumes[vm.Name]
			switch {
			case v.Secret != nil:
				for _, it := range v.Secret.Items {
					if it.Path == rel {
						return m.secretValue(v.Secret.SecretName, it.Key)
					}
				}
			case v.ConfigMap != nil && m.configMaps[v.ConfigMap.Name] != nil:
				for _, it := range v.ConfigMap.Items {
					if it.Path == rel {
						s, ok := m.configMaps[v.ConfigMap.Name].Data[it.Key]
						return s, ok
					}
				}
			}
		}
		return "", false
	}

	vars := map[string]string{}
	for _, e := range c.Env {
		val := e.Value
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			v, ok := m.secretValue(ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
			if !ok {
				t.Errorf("env %s: Secret %s has no key %s", e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
			}
			val = v
		} else if ref != nil && ref.FieldRef != nil {
			val = "from-" + ref.FieldRef.FieldPath
		}
		vars[e.Name] = val
		if strings.HasPrefix(e.Name, "VIGIL_") {
			t.Setenv(e.Name, val) // the loader reads VIGIL_* like the binary does
		}
	}

	// The command line, with $(VAR) expanded as the kubelet does, the
	// files it names read from their volumes, and --config pointed at a
	// copy of the mounted file.
	dir := t.TempDir()
	args := make([]string, len(c.Args))
	var configs []string
	for i, a := range c.Args {
		a = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`).ReplaceAllStringFunc(a, func(ref string) string {
			v, ok := vars[ref[2:len(ref)-1]]
			if !ok {
				t.Errorf("arg %q: %s is not in the container's env", c.Args[i], ref)
			}
			return v
		})
		if name, val, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "--") && strings.HasPrefix(val, "/") {
			content, found := fileAt(val)
			if !found {
				t.Errorf("%s %s: no Secret or ConfigMap volume mounts this file", name, val)
			}
			if name == "--config" {
				local := filepath.Join(dir, path.Base(val))
				if err := os.WriteFile(local, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
				a, configs = name+"="+local, append(configs, local)
			}
		}
		args[i] = a
	}
	if len(configs) != 1 {
		t.Fatalf("args %q: want one --config=FILE", c.Args)
	}
	cmd, err := loadCommandLine(t, args)
	if err != nil {
		t.Fatalf("vigil %s: %v", strings.Join(args, " "), err)
	}
	if unknown := unknownConfigKeys(t, cmd, configs[0]); len(unknown) > 0 {
		t.Errorf("%s: keys that are no flag of vigil %s: %v", c.Args, args[0], unknown)
	}
	for _, e := range c.Env {
		if name, ok := strings.CutPrefix(e.Name, "VIGIL_"); ok {
			if cmd.Flags().Lookup(strings.ToLower(strings.ReplaceAll(name, "_", "-"))) == nil {
				t.Errorf("env %s names no flag of vigil %s", e.Name, args[0])
			}
		}
	}
	for _, secret := range []string{"token", "agent-token", "operator-token", "etcd-password"} {
		if f := cmd.Flags().Lookup(secret); f != nil && f.Value.String() != "" {
			t.Errorf("--%s is given as a value; mount the Secret and use --%s-file", secret, secret)
		}
	}

	if args[0] == "agent" {
		drain, _ := cmd.Flags().GetDuration("drain-timeout")
		grace, _ := cmd.Flags().GetDuration("kill-grace")
		tg := pod.TerminationGracePeriodSeconds
		if tg == nil || time.Duration(*tg)*time.Second <= drain+grace {
			t.Errorf("terminationGracePeriodSeconds must be set and exceed drain-timeout %s + kill-grace %s", drain, grace)
		}
	}
}

// TestDeployKubernetesStrictDecoding shows that decoding is strict: a
// mistyped field or a duplicated key in a manifest fails.
func TestDeployKubernetesStrictDecoding(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir, "kubernetes", "server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	deployment := docSeparator.Split(string(data), -1)[0]
	if _, err := decodeK8sManifest([]byte(deployment)); err != nil {
		t.Fatalf("the unmodified Deployment must decode: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown field":   strings.Replace(deployment, "readinessProbe:", "readinesProbe:", 1),
		"misplaced field": strings.Replace(deployment, "  replicas: 3", "  replica: 3", 1),
		"duplicate key":   strings.Replace(deployment, "  replicas: 3", "  replicas: 3\n  replicas: 2", 1),
		"wrong type":      strings.Replace(deployment, "  replicas: 3", "  replicas: three", 1),
	} {
		if doc == deployment {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if _, err := decodeK8sManifest([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}
