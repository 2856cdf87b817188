package action

// CloseOutput returns the shortest text that makes prefix a whole output
// of the grammar (see ValidOutputPrefix), and false when no text can.
// Constrained decoding uses it to end an output within its token limit.
func CloseOutput(prefix string) (string, bool) { return closeGrammar(prefix, 0) }

// closeGrammar is matchGrammar's counterpart: the shortest c such that s+c
// matches outputGrammar[i:] whole.
func closeGrammar(s string, i int) (string, bool) {
	if i == len(outputGrammar) {
		return "", s == ""
	}
	e := outputGrammar[i]
	best, found := "", false
	try := func(c string, ok bool) {
		if ok && (!found || len(c) < len(best)) {
			best, found = c, true
		}
	}
	switch e.kind {
	case 'l':
		try(closeLiteral(s, e.lit, i))
	case 't':
		for _, t := range Types {
			try(closeLiteral(s, t.String(), i))
		}
	case 'p':
		// TYPE ("," TYPE)*
		for _, t := range Types {
			name := t.String()
			if len(s) < len(name) {
				try(closeLiteral(s, name, i))
				continue
			}
			if len(s) > len(name) && s[:len(name)] == name && s[len(name)] == ',' {
				try(closeGrammar(s[len(name)+1:], i))
			}
			try(closeLiteral(s, name, i))
		}
	case 'n':
		if s == "" {
			rest, ok := closeGrammar("", i+1)
			try("0.0"+rest, ok)
			break
		}
		n, complete, ok := scanNumber(s)
		if !ok {
			break
		}
		if n < len(s) {
			if complete {
				try(closeGrammar(s[n:], i+1))
			}
			break
		}
		num := ""
		if !complete {
			num = finishNumber(s)
		}
		rest, ok := closeGrammar("", i+1)
		try(num+rest, ok)
	case 'x':
		for j := 0; j < len(s); j++ {
			if s[j] == '"' {
				return closeGrammar(s[j:], i+1)
			}
		}
		return closeGrammar("", i+1)
	}
	return best, found
}

func closeLiteral(s, lit string, i int) (string, bool) {
	if len(s) <= len(lit) {
		if lit[:len(s)] != s {
			return "", false
		}
		rest, ok := closeGrammar("", i+1)
		return lit[len(s):] + rest, ok
	}
	if s[:len(lit)] != lit {
		return "", false
	}
	return closeGrammar(s[len(lit):], i+1)
}

// finishNumber completes a number prefix that scanNumber accepted but did
// not find complete: "-", "-1", "-1.", "0", "1", "0.", "1.".
func finishNumber(s string) string {
	if s[0] == '-' {
		return "-1.0"[len(s):]
	}
	if len(s) == 1 {
		return ".0"
	}
	return "0"
}
