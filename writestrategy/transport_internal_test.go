package writestrategy

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A file's error is not the connection lost: a syscall.Errno satisfies
// net.Error, and an Iceberg metadata file gone or a full disk was named
// ErrConnectionLost ("nothing was written", reconciled by the next write).
func TestTransportErrorNotFileErrors(t *testing.T) {
	outs := []string{"daily"}
	for name, err := range map[string]error{
		"missing file": &fs.PathError{Op: "open", Path: "/w/t/metadata/00004.metadata.json", Err: syscall.ENOENT},
		"full disk":    &fs.PathError{Op: "write", Path: "/w/t/data/0.parquet", Err: syscall.ENOSPC},
		"permission":   &fs.PathError{Op: "open", Path: "/w/t", Err: syscall.EACCES},
		"bare errno":   syscall.EIO,
	} {
		wrapped := fmt.Errorf("facade: load table lakewrite.daily: %w", err)
		require.False(t, transportError(wrapped), name)
		got := connectionLost(wrapped, outs)
		require.NotErrorIs(t, got, ErrConnectionLost, name)
		require.ErrorIs(t, got, err, name)
	}
	for name, err := range map[string]error{
		"reset":       &net.OpError{Op: "read", Net: "unix", Err: syscall.ECONNRESET},
		"socket gone": &net.OpError{Op: "dial", Net: "unix", Err: &fs.PathError{Op: "connect", Path: "/tmp/.s.PGSQL.5432", Err: syscall.ENOENT}},
		"refused":     &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		"broken pipe": syscall.EPIPE,
		"closed":      net.ErrClosed,
		"bare reset":  fmt.Errorf("write: %w", syscall.ECONNRESET),
	} {
		require.True(t, transportError(fmt.Errorf("ledger: commit: %w", err)), name)
		require.ErrorIs(t, connectionLost(fmt.Errorf("ledger: commit: %w", err), outs), ErrConnectionLost, name)
	}
	require.False(t, transportError(errors.New("some other failure")))
}
