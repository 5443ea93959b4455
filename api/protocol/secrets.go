package protocol

import "time"

// Secret describes one stored secret (GET /v1/secrets, PUT
// /v1/secrets/{name}); no reply ever carries a value. Times are the
// database clock's.
type Secret struct {
	Name string `json:"name"`
	// Version counts the sets of the name, from 1.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// SecretList is the reply of GET /v1/secrets, by name.
type SecretList struct {
	Secrets []Secret `json:"secrets"`
}

// SetSecretRequest is the body of PUT /v1/secrets/{name}: the value, as
// UTF-8 text of 4 bytes to 64 KiB without NUL (docs/security.md
// "Secrets").
type SetSecretRequest struct {
	Value string `json:"value"`
}

// SetSecretResponse is the reply of PUT /v1/secrets/{name}: the stored
// version, and whether the name is new.
type SetSecretResponse struct {
	Secret
	Created bool `json:"created"`
}
