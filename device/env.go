package device

import "os"

func defaultGetenv(k string) string { return os.Getenv(k) }
