package loopback

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheck(t *testing.T) {
	for _, u := range []string{"http://localhost:1/", "http://127.0.0.1:1/", "http://[::1]:1/", "http://127.1.2.3/", "https://127.0.0.1/"} {
		_, err := Check(u)
		assert.NoError(t, err, u)
	}
	for _, u := range []string{"http://example.com/", "http://10.0.0.1:80/", "ftp://127.0.0.1/", "http://[::1", "http://0.0.0.0:80/"} {
		_, err := Check(u)
		assert.Error(t, err, u)
	}
}
