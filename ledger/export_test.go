package ledger

import (
	"errors"
	"time"
)

// The names below are unexported; the external tests reach them here.

var ErrIDInUse = errIDInUse

// SetID pre-mints the transaction id of the intent p opens.
func (p *OpenParams) SetID(id string) { p.id = id }

// WithID returns p with a pre-minted transaction id.
func WithID(p OpenParams, id string) OpenParams { p.id = id; return p }

// WithLockTimeout sets the lock timeout of c and returns c.
func WithLockTimeout(c *Config, d time.Duration) *Config { c.lockTimeout = d; return c }

// WithCleanupTimeout sets the clean-up timeout of c and returns c.
func WithCleanupTimeout(c *Config, d time.Duration) *Config { c.cleanupTimeout = d; return c }

// AsIntent returns the intent t as an Intent value that holds nothing.
func (t Txn) AsIntent() *Intent { return t.intent() }

// WithMaxBackoff sets the longest backoff between Open attempts of c and
// returns c.
func WithMaxBackoff(c *Config, d time.Duration) *Config { c.maxBackoff = d; return c }

func (in Intent) Attempt() int64 { return in.attempt }

func (in Intent) Actor() string { return in.actor }

func (in Intent) IdempotencyKey() string { return in.idempotencyKey }

func (t Txn) IdempotencyKey() string { return t.idempotencyKey }

// BusyHolder reports whether err is Open's busy error, and the intent it
// names as the holder.
func BusyHolder(err error) (string, bool) {
	var be *busyError
	if !errors.As(err, &be) {
		return "", false
	}
	return be.holderID, true
}
