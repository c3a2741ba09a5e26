package identity

import (
	"errors"
)

var errBadUUID = errors.New("not a UUID")

// parseUUID parses the canonical 8-4-4-4-12 form (also without dashes or
// in braces).
func parseUUID(s string) ([16]byte, error) {
	var u [16]byte
	if len(s) == 38 && s[0] == '{' && s[37] == '}' {
		s = s[1:37]
	}
	j := 0
	for i := 0; i < len(s); {
		if s[i] == '-' {
			i++
			continue
		}
		if j == 16 || i+1 >= len(s) {
			return u, errBadUUID
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return u, errBadUUID
		}
		u[j] = hi<<4 | lo
		j++
		i += 2
	}
	if j != 16 {
		return u, errBadUUID
	}
	return u, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
