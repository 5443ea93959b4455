package retry

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNext(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		p     Policy
		try   int
		retry bool
		delay time.Duration
	}{
		{"no retries", Policy{}, 1, false, 0},
		{"first failure retried", Policy{Retries: 2, Delay: 10 * time.Second}, 1, true, 10 * time.Second},
		{"last budget", Policy{Retries: 2, Delay: 10 * time.Second}, 2, true, 10 * time.Second},
		{"budget spent", Policy{Retries: 2, Delay: 10 * time.Second}, 3, false, 0},
		{"exponential doubles", Policy{Retries: 5, Delay: time.Second, Exponential: true}, 3, true, 4 * time.Second},
		{"exponential capped", Policy{Retries: 50, Delay: time.Second, Exponential: true, MaxDelay: 30 * time.Second}, 40, true, 30 * time.Second},
		{"exponential default cap", Policy{Retries: 50, Delay: time.Minute, Exponential: true}, 20, true, DefaultMaxDelay},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			retry, delay := c.p.Next(c.try)
			assert.Equal(t, c.retry, retry)
			assert.Equal(t, c.delay, delay)
		})
	}
}
