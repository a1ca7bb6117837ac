// Package kubernetes_test renders the kustomize base and example overlay
// with the kustomize library, validates every object against the
// Kubernetes 1.30 OpenAPI schemas (kubectl-validate's embedded copies, so
// offline), and asserts what the deployment depends on: one writer with a
// claim, replicas with claims, a PDB and an HPA, the Services, probes,
// resources, the restricted security context, and tokens only from Secrets.
//
// It is a Go module of its own: the Kubernetes libraries stay out of the
// service's module and out of deploy/'s.
package kubernetes_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/kubectl-validate/pkg/openapiclient"
	"sigs.k8s.io/kubectl-validate/pkg/validator"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kubernetesVersion is the schema version the manifests are validated
// against (the newest kubectl-validate v0.0.4 embeds).
const kubernetesVersion = "1.30"

// object is one rendered manifest.
type object struct {
	Kind, Name string
	YAML       []byte
}

// render runs kustomize build on dir and returns its objects.
func render(t *testing.T, dir string) []object {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []object
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, object{Kind: r.GetKind(), Name: r.GetName(), YAML: b})
	}
	return objs
}

func TestKubernetesManifests(t *testing.T) {
	v, err := validator.New(openapiclient.NewHardcodedBuiltins(kubernetesVersion))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"base", "overlays/example"} {
		t.Run(strings.ReplaceAll(dir, "/", "-"), func(t *testing.T) {
			objs := render(t, dir)
			for _, o := range objs {
				_, u, err := v.Parse(o.YAML) // strict: an unknown field is an error
				if err == nil {
					err = v.Validate(u)
				}
				if err != nil {
					t.Errorf("%s %s does not validate against the Kubernetes %s schema: %v", o.Kind, o.Name, kubernetesVersion, err)
				}
			}
			checkDeployment(t, objs)
		})
	}
}

// TestValidatorRejects makes sure the validation above can fail: a field
// of the wrong type and an unknown field are refused.
func TestValidatorRejects(t *testing.T) {
	v, err := validator.New(openapiclient.NewHardcodedBuiltins(kubernetesVersion))
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{
		"wrong type":    "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  replicas: one\n  serviceName: x\n  selector: {matchLabels: {a: b}}\n  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: i}]}}\n",
		"unknown field": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  clusterIPs: [None]\n  portz: []\n",
	} {
		_, u, err := v.Parse([]byte(doc))
		if err == nil {
			err = v.Validate(u)
		}
		if err == nil {
			t.Errorf("%s: validated", name)
		}
	}
}

func decode[T any](t *testing.T, objs []object, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Name == name {
			out := new(T)
			if err := yaml.UnmarshalStrict(o.YAML, out); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("no %s %s in the rendering", kind, name)
	return nil
}

func checkDeployment(t *testing.T, objs []object) {
	for _, o := range objs {
		if o.Kind == "Secret" {
			t.Errorf("Secret %s is in the manifests: secrets are created apart (deploy/README.md)", o.Name)
		}
	}
	writer := decode[appsv1.StatefulSet](t, objs, "StatefulSet", "utxo-cache-writer")
	replica := decode[appsv1.StatefulSet](t, objs, "StatefulSet", "utxo-cache-replica")
	pdb := decode[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "utxo-cache-replica")
	hpa := decode[autoscalingv2.HorizontalPodAutoscaler](t, objs, "HorizontalPodAutoscaler", "utxo-cache-replica")
	writerSvc := decode[corev1.Service](t, objs, "Service", "utxo-cache-writer")
	readSvc := decode[corev1.Service](t, objs, "Service", "utxo-cache-read")
	settings := configMap(t, objs, "utxo-cache-settings")

	// One writer, its store on a claim; replicas each on their own claim.
	if writer.Spec.Replicas == nil || *writer.Spec.Replicas != 1 {
		t.Errorf("writer replicas = %v, want exactly 1", writer.Spec.Replicas)
	}
	for _, s := range []*appsv1.StatefulSet{writer, replica} {
		checkClaim(t, s)
		checkPod(t, s)
		sel, err := metaSelector(s.Spec.Selector.MatchLabels)
		if err != nil || !sel.Matches(labels.Set(s.Spec.Template.Labels)) {
			t.Errorf("%s: its selector does not match its pods", s.Name)
		}
	}
	if writerSvc.Spec.ClusterIP != corev1.ClusterIPNone || writer.Spec.ServiceName != writerSvc.Name {
		t.Errorf("writer Service: clusterIP %q, StatefulSet serviceName %q: want a headless Service governing the writer", writerSvc.Spec.ClusterIP, writer.Spec.ServiceName)
	}
	if !selects(writerSvc.Spec.Selector, writer) || selects(writerSvc.Spec.Selector, replica) {
		t.Error("the writer Service must select the writer's pod and no replica")
	}
	if readSvc.Spec.ClusterIP == corev1.ClusterIPNone || !selects(readSvc.Spec.Selector, replica) || selects(readSvc.Spec.Selector, writer) {
		t.Error("the read Service must balance over the replicas (not headless, replicas only)")
	}

	// Replicas follow the writer through its Service, with the token file.
	args := container(t, replica).Args
	wantOf := fmt.Sprintf("--replica-of=http://%s:%d", writerSvc.Name, writerSvc.Spec.Ports[0].Port)
	if !slices.Contains(args, wantOf) {
		t.Errorf("replica args %q lack %s", args, wantOf)
	}
	checkTokenFile(t, writer, "--admin-token-file=", "utxo-cache-admin-token")
	checkTokenFile(t, writer, "--replication-token-file=", "utxo-cache-replication-token")
	checkTokenFile(t, replica, "--replication-token-file=", "utxo-cache-replication-token")
	if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--admin-token") }) {
		t.Error("a replica is given an admin token (it refuses one)")
	}
	for k, v := range settings {
		if strings.Contains(k, "TOKEN") || strings.Contains(k, "PASSWORD") {
			t.Errorf("ConfigMap utxo-cache-settings holds %s=%q: secrets belong in Secrets", k, v)
		}
	}

	// Probes: a startup probe long enough for a replica's bootstrap.
	sp := container(t, replica).StartupProbe
	if budget := sp.PeriodSeconds * sp.FailureThreshold; budget < 3600 {
		t.Errorf("replica startup probe allows %d s, want at least an hour for a bootstrap", budget)
	}

	// PDB and HPA for the replicas.
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() < 1 {
		t.Errorf("PDB minAvailable = %v, want at least 1", pdb.Spec.MinAvailable)
	}
	if sel, err := metaSelector(pdb.Spec.Selector.MatchLabels); err != nil || !sel.Matches(labels.Set(replica.Spec.Template.Labels)) || sel.Matches(labels.Set(writer.Spec.Template.Labels)) {
		t.Error("the PDB must select the replicas' pods, not the writer's")
	}
	ref := hpa.Spec.ScaleTargetRef
	if ref.Kind != "StatefulSet" || ref.Name != replica.Name {
		t.Errorf("HPA scales %s %s, want the replicas' StatefulSet", ref.Kind, ref.Name)
	}
	if hpa.Spec.MinReplicas == nil || *hpa.Spec.MinReplicas < 2 || hpa.Spec.MaxReplicas <= *hpa.Spec.MinReplicas {
		t.Errorf("HPA min %v max %d: want at least 2 and room to grow", hpa.Spec.MinReplicas, hpa.Spec.MaxReplicas)
	}
}

func metaSelector(m map[string]string) (labels.Selector, error) {
	if len(m) == 0 {
		return nil, fmt.Errorf("empty selector")
	}
	return labels.SelectorFromSet(m), nil
}

func selects(sel map[string]string, s *appsv1.StatefulSet) bool {
	return len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(s.Spec.Template.Labels))
}

func container(t *testing.T, s *appsv1.StatefulSet) *corev1.Container {
	t.Helper()
	cs := s.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%s has %d containers, want 1", s.Name, len(cs))
	}
	return &cs[0]
}

func configMap(t *testing.T, objs []object, prefix string) map[string]string {
	t.Helper()
	for _, o := range objs {
		if o.Kind == "ConfigMap" && strings.HasPrefix(o.Name, prefix) {
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(o.YAML, &cm); err != nil {
				t.Fatal(err)
			}
			return cm.Data
		}
	}
	t.Fatalf("no ConfigMap %s", prefix)
	return nil
}

// checkClaim: the store directory is on the StatefulSet's claim.
func checkClaim(t *testing.T, s *appsv1.StatefulSet) {
	t.Helper()
	if len(s.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("%s: %d volume claim templates, want 1", s.Name, len(s.Spec.VolumeClaimTemplates))
	}
	claim := s.Spec.VolumeClaimTemplates[0]
	if q := claim.Spec.Resources.Requests[corev1.ResourceStorage]; q.IsZero() {
		t.Errorf("%s: the claim requests no storage", s.Name)
	}
	c := container(t, s)
	var dataDir string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok {
			dataDir = v
		}
	}
	mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == claim.Name && dataDir != "" && (dataDir == m.MountPath || strings.HasPrefix(dataDir, m.MountPath+"/")) && !m.ReadOnly
	})
	if !mounted {
		t.Errorf("%s: --data-dir %q is not on the claim %s", s.Name, dataDir, claim.Name)
	}
}

// checkPod: probes, resources and the restricted security context.
func checkPod(t *testing.T, s *appsv1.StatefulSet) {
	t.Helper()
	pod := s.Spec.Template.Spec
	c := container(t, s)
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != c.Ports[0].Name {
			t.Errorf("%s: %s probe %+v, want GET %s on port %s", s.Name, what, p, path, c.Ports[0].Name)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")
	if c.StartupProbe == nil || c.StartupProbe.HTTPGet == nil {
		t.Errorf("%s: no HTTP startup probe", s.Name)
	}
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("%s: %s request %v limit %v, want both, request <= limit", s.Name, r, req.String(), lim.String())
		}
	}
	psc, sc := pod.SecurityContext, c.SecurityContext
	switch {
	case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0:
		t.Errorf("%s: pod securityContext %+v, want runAsNonRoot with a non-zero uid", s.Name, psc)
	case psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("%s: seccomp profile %+v, want RuntimeDefault", s.Name, psc.SeccompProfile)
	}
	switch {
	case sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Errorf("%s: allowPrivilegeEscalation not false", s.Name)
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Errorf("%s: root file system not read-only", s.Name)
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("%s: capabilities %+v, want drop ALL and add none", s.Name, sc.Capabilities)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: the service account token is mounted", s.Name)
	}
	for _, e := range c.Env {
		if e.Value != "" && (strings.Contains(e.Name, "TOKEN") || strings.Contains(e.Name, "PASSWORD")) {
			t.Errorf("%s: env %s has a literal value", s.Name, e.Name)
		}
	}
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--admin-token=") || strings.HasPrefix(a, "--replication-token=") {
			t.Errorf("%s: a token on the command line: %s", s.Name, a)
		}
	}
}

// checkTokenFile: flag names a file in a read-only mount of the Secret.
func checkTokenFile(t *testing.T, s *appsv1.StatefulSet, flag, secret string) {
	t.Helper()
	c := container(t, s)
	var file string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, flag); ok {
			file = v
		}
	}
	if file == "" {
		t.Errorf("%s: no %s", s.Name, flag)
		return
	}
	for _, m := range c.VolumeMounts {
		if !strings.HasPrefix(file, m.MountPath+"/") {
			continue
		}
		for _, v := range s.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == secret && m.ReadOnly {
				return
			}
		}
	}
	t.Errorf("%s: %s%s is not in a read-only mount of Secret %s", s.Name, flag, file, secret)
}
