package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/vigil-sched/vigil/api/protocol"
	"github.com/vigil-sched/vigil/dag"
	"github.com/vigil-sched/vigil/secrets"
	"github.com/vigil-sched/vigil/state"
	"github.com/vigil-sched/vigil/store"
)

// Secrets (docs/security.md "Secrets"): the secrets routes need
// AccessAdmin; values go into the store only sealed by Config.Secrets,
// and come out opened only into the claim reply of the agent that
// claimed a task naming them. No other reply, event or log line of the
// server holds one: handlers here log names and versions only.

// maxSecretBody bounds a PUT /v1/secrets/{name} body: the largest value
// with every byte JSON-escaped (\u00XX, 6 bytes), and the object around it.
const maxSecretBody = 6*secrets.MaxValueBytes + 1024

// errSecretsOff is the message of a secrets route, or of an apply naming
// a secret, on a server started without a key.
const errSecretsOff = "secrets are not configured on this server: start it with --secrets-key-file (docs/security.md \"Secrets\")"

// secretsOn writes the refusal of a server without a key and reports
// false, or reports true.
func (s *Server) secretsOn(w http.ResponseWriter) bool {
	if s.cfg.Secrets == nil {
		writeError(w, http.StatusServiceUnavailable, protocol.CodeSecretsDisabled, errSecretsOff)
		return false
	}
	return true
}

// secretName reads and checks the {name} path parameter.
func secretName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("name")
	if !secrets.ValidName(name) {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest,
			fmt.Sprintf("path parameter name: %q must be %s", truncateForError(name), secrets.NameRule))
		return "", false
	}
	return name, true
}

// truncateForError cuts a caller's string to 64 bytes for a message.
func truncateForError(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func toSecret(i store.SecretInfo) protocol.Secret {
	return protocol.Secret{Name: i.Name, Version: i.Version, CreatedAt: i.CreatedAt, UpdatedAt: i.UpdatedAt}
}

// listSecrets answers GET /v1/secrets: names, versions and times.
func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	if !s.secretsOn(w) {
		return
	}
	list, err := s.cfg.Store.ListSecrets(r.Context())
	if err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, protocol.SecretList{Secrets: convertSlice(list, toSecret)})
}

// setSecret answers PUT /v1/secrets/{name}: a new version sealed with the
// server's key. The value is checked by secrets.CheckValue.
func (s *Server) setSecret(w http.ResponseWriter, r *http.Request) {
	if !s.secretsOn(w) {
		return
	}
	name, ok := secretName(w, r)
	if !ok {
		return
	}
	var req protocol.SetSecretRequest
	if !decodeFrom(w, http.MaxBytesReader(w, r.Body, maxSecretBody), &req) {
		return
	}
	if err := secrets.CheckValue([]byte(req.Value)); err != nil {
		writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, "value: "+err.Error())
		return
	}
	box := s.cfg.Secrets
	info, created, err := s.cfg.Store.SetSecret(r.Context(), name, secrets.MaxSecrets, func(version int64) ([]byte, error) {
		return box.Seal(name, version, []byte(req.Value))
	})
	var limit *store.SecretLimitError
	switch {
	case errors.As(err, &limit):
		writeError(w, http.StatusConflict, protocol.CodeConflict, limit.Error())
		return
	case err != nil:
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("secret set", "name", name, "version", info.Version, "created", created, "actor", actorOf(r))
	writeJSON(w, http.StatusOK, protocol.SetSecretResponse{Secret: toSecret(info), Created: created})
}

// deleteSecret answers DELETE /v1/secrets/{name}; a TI claimed later whose
// env names it fails with reason secret_missing.
func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if !s.secretsOn(w) {
		return
	}
	name, ok := secretName(w, r)
	if !ok {
		return
	}
	if err := s.cfg.Store.DeleteSecret(r.Context(), name); err != nil {
		s.writeStoreError(w, r, err)
		return
	}
	s.log.Info("secret deleted", "name", name, "actor", actorOf(r))
	w.WriteHeader(http.StatusNoContent)
}

// checkSecretsOn refuses a spec that names a secret when the server has
// no key: a 400 naming the DAG, task, variable and secret of the first
// reference. (Whether each secret exists is store.ApplyDAG's check.) It
// reports whether the spec may be applied.
func (s *Server) checkSecretsOn(w http.ResponseWriter, spec *dag.Spec) bool {
	uses := spec.SecretUses()
	if len(uses) == 0 || s.cfg.Secrets != nil {
		return true
	}
	writeError(w, http.StatusBadRequest, protocol.CodeBadRequest, fmt.Sprintf("dag %q: %s: %s", spec.DAGID, uses[0], errSecretsOff))
	return false
}

// resolveSecrets fills in the secret values of the TIs agentID just
// claimed, for that agent's claim reply alone. A TI naming a secret that
// no longer exists (deleted after the apply), or that does not open,
// is completed failed with reason secret_missing and left out of the
// reply, so no task runs with a missing value.
func (s *Server) resolveSecrets(ctx context.Context, agentID int64, tasks []protocol.ClaimedTask, refs []map[string]string) ([]protocol.ClaimedTask, error) {
	var names []string
	for _, m := range refs {
		for _, n := range m {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return tasks, nil
	}
	var sealed map[string]store.SealedSecret
	if s.cfg.Secrets != nil {
		var err error
		if sealed, err = s.cfg.Store.SealedSecrets(ctx, names); err != nil {
			return nil, err
		}
	}
	out := tasks[:0]
	for i, t := range tasks {
		values, why := s.openSecrets(refs[i], sealed)
		if why == "" {
			t.Secrets = values
			out = append(out, t)
			continue
		}
		s.log.Warn("claimed task instance failed: secret missing", "agent_id", agentID, "ti_id", t.TIID, "run_id", t.RunID,
			"task_id", t.TaskID, "try_number", t.TryNumber, "why", why)
		_, _, err := s.cfg.Store.Complete(ctx, agentID, store.Completion{Attempt: fromAttempt(t.Attempt),
			Outcome: state.OutcomeFailed, Failure: state.FailureSecretMissing, Error: why})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// openSecrets opens the secrets refs names (variable → secret) from
// sealed, or returns why one cannot be delivered, naming the variable and
// the secret, never a value.
func (s *Server) openSecrets(refs map[string]string, sealed map[string]store.SealedSecret) (map[string]string, string) {
	if len(refs) == 0 {
		return nil, ""
	}
	if s.cfg.Secrets == nil {
		return nil, "this server has no secrets key (--secrets-key-file)"
	}
	values := make(map[string]string, len(refs))
	for v, name := range refs {
		sec, ok := sealed[name]
		if !ok {
			return nil, fmt.Sprintf("env %s: secret %q does not exist (deleted after the DAG was applied?)", v, name)
		}
		b, err := s.cfg.Secrets.Open(sec.Name, sec.Version, sec.Sealed)
		if err != nil {
			return nil, fmt.Sprintf("env %s: secret %q version %d %v", v, name, sec.Version, err)
		}
		values[v] = string(b)
	}
	return values, ""
}
