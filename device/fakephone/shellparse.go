package fakephone

import (
	"errors"
	"strings"
)

// ParseShell splits a command line the way a POSIX shell (Android's mksh)
// would, without expanding anything. It returns the simple commands the shell
// would execute, in order, each as argv after quote removal, and the hazards:
// every piece of syntax outside quotes that makes a real shell do more than
// run one command with literal arguments (see ShellCommand.Hazards).
// Commands inside $(...) and backticks are parsed recursively and listed
// before the command whose word contains them.
func ParseShell(line string) (commands [][]string, hazards []string, err error) {
	p := &shellParser{s: line}
	if err := p.parse(); err != nil {
		return p.cmds, p.hazards, err
	}
	return p.cmds, p.hazards, nil
}

type shellParser struct {
	s       string
	i       int
	cmds    [][]string
	hazards []string

	cur      []string
	subst    [][]string // commands from substitutions in the current command
	word     strings.Builder
	inWord   bool
	redirect bool // the next word is a redirection target, not an argument
}

var errNoClosingQuote = errors.New("no closing quote")

func (p *shellParser) hazard(h string) { p.hazards = append(p.hazards, h) }

func (p *shellParser) endWord() {
	if !p.inWord {
		return
	}
	if p.redirect {
		p.redirect = false
	} else {
		p.cur = append(p.cur, p.word.String())
	}
	p.word.Reset()
	p.inWord = false
}

func (p *shellParser) endCommand() {
	p.endWord()
	p.cmds = append(p.cmds, p.subst...)
	p.subst = nil
	if len(p.cur) > 0 {
		p.cmds = append(p.cmds, p.cur)
	}
	p.cur = nil
	p.redirect = false
}

func (p *shellParser) peek(off int) byte {
	if p.i+off < len(p.s) {
		return p.s[p.i+off]
	}
	return 0
}

// operator consumes the longest of the candidates at the cursor.
func (p *shellParser) operator(cands ...string) string {
	best := ""
	for _, c := range cands {
		if strings.HasPrefix(p.s[p.i:], c) && len(c) > len(best) {
			best = c
		}
	}
	p.i += len(best)
	return best
}

func (p *shellParser) parse() error {
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch c {
		case ' ', '\t':
			p.endWord()
			p.i++
		case '\n':
			p.hazard("newline")
			p.endCommand()
			p.i++
		case ';':
			p.hazard(p.operator(";", ";;", ";&", ";|"))
			p.endCommand()
		case '&':
			p.hazard(p.operator("&", "&&", "&|"))
			p.endCommand()
		case '|':
			p.hazard(p.operator("|", "||", "|&"))
			p.endCommand()
		case '(', ')':
			p.hazard(string(c))
			p.endCommand()
			p.i++
		case '<', '>':
			// "2>x": a word of digits right before the operator is its fd.
			if p.inWord && isDigits(p.word.String()) {
				p.word.Reset()
				p.inWord = false
			} else {
				p.endWord()
			}
			p.hazard("redirection " + p.operator("<", ">", ">>", ">&", ">|", "<<", "<&", "<>", "<<-", "<<<", "&>"))
			p.redirect = true
		case '\\':
			switch {
			case p.peek(1) == '\n': // line continuation
				p.i += 2
			case p.i+1 < len(p.s):
				p.word.WriteByte(p.s[p.i+1])
				p.inWord = true
				p.i += 2
			default:
				p.word.WriteByte('\\')
				p.inWord = true
				p.i++
			}
		case '\'':
			end := strings.IndexByte(p.s[p.i+1:], '\'')
			if end < 0 {
				return errNoClosingQuote
			}
			p.word.WriteString(p.s[p.i+1 : p.i+1+end])
			p.inWord = true
			p.i += end + 2
		case '"':
			if err := p.doubleQuoted(); err != nil {
				return err
			}
		case '`':
			if err := p.backtick(); err != nil {
				return err
			}
		case '$':
			if err := p.dollar(); err != nil {
				return err
			}
		case '#':
			if p.inWord {
				p.word.WriteByte(c)
				p.i++
				continue
			}
			p.hazard("comment")
			if nl := strings.IndexByte(p.s[p.i:], '\n'); nl >= 0 {
				p.i += nl
			} else {
				p.i = len(p.s)
			}
		case '*', '?', '[':
			p.hazard("glob " + string(c))
			p.word.WriteByte(c)
			p.inWord = true
			p.i++
		case '{':
			p.hazard("brace {") // mksh brace expansion, or a group
			p.word.WriteByte(c)
			p.inWord = true
			p.i++
		case '~':
			if !p.inWord {
				p.hazard("tilde")
			}
			p.word.WriteByte(c)
			p.inWord = true
			p.i++
		default:
			p.word.WriteByte(c)
			p.inWord = true
			p.i++
		}
	}
	p.endCommand()
	return nil
}

func (p *shellParser) doubleQuoted() error {
	p.i++ // opening quote
	p.inWord = true
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch c {
		case '"':
			p.i++
			return nil
		case '\\':
			switch n := p.peek(1); n {
			case '$', '`', '"', '\\':
				p.word.WriteByte(n)
				p.i += 2
			case '\n':
				p.i += 2
			default:
				p.word.WriteByte('\\')
				p.i++
			}
		case '`':
			if err := p.backtick(); err != nil {
				return err
			}
		case '$':
			if err := p.dollar(); err != nil {
				return err
			}
		default:
			p.word.WriteByte(c)
			p.i++
		}
	}
	return errNoClosingQuote
}

// backtick handles `cmd`: the shell runs cmd and splices its output.
func (p *shellParser) backtick() error {
	var inner strings.Builder
	j := p.i + 1
	for ; j < len(p.s); j++ {
		if p.s[j] == '\\' && j+1 < len(p.s) {
			inner.WriteByte(p.s[j+1])
			j++
			continue
		}
		if p.s[j] == '`' {
			break
		}
		inner.WriteByte(p.s[j])
	}
	if j >= len(p.s) {
		return errors.New("no closing quote")
	}
	p.hazard("command substitution `")
	if err := p.substitute(inner.String()); err != nil {
		return err
	}
	p.word.WriteString(p.s[p.i : j+1])
	p.inWord = true
	p.i = j + 1
	return nil
}

func (p *shellParser) substitute(inner string) error {
	cmds, hz, err := ParseShell(inner)
	p.subst = append(p.subst, cmds...)
	p.hazards = append(p.hazards, hz...)
	return err
}

func (p *shellParser) dollar() error {
	n := p.peek(1)
	switch {
	case n == '(' && p.peek(2) == '(':
		end, err := matchParen(p.s, p.i+1)
		if err != nil {
			return err
		}
		p.hazard("arithmetic $((")
		p.word.WriteString(p.s[p.i : end+1])
		p.inWord = true
		p.i = end + 1
	case n == '(':
		end, err := matchParen(p.s, p.i+1)
		if err != nil {
			return err
		}
		p.hazard("command substitution $(")
		if err := p.substitute(p.s[p.i+2 : end]); err != nil {
			return err
		}
		p.word.WriteString(p.s[p.i : end+1])
		p.inWord = true
		p.i = end + 1
	case n == '{':
		end := strings.IndexByte(p.s[p.i:], '}')
		if end < 0 {
			return errors.New("${: bad substitution")
		}
		p.hazard("parameter expansion ${")
		p.word.WriteString(p.s[p.i : p.i+end+1])
		p.inWord = true
		p.i += end + 1
	case n == '\'':
		p.hazard("ansi-c quoting $'")
		p.word.WriteByte('$')
		p.inWord = true
		p.i++
	case n == '_' || isAlpha(n):
		j := p.i + 1
		for j < len(p.s) && (p.s[j] == '_' || isAlpha(p.s[j]) || isDigit(p.s[j])) {
			j++
		}
		p.hazard("parameter expansion $" + p.s[p.i+1:j])
		p.word.WriteString(p.s[p.i:j])
		p.inWord = true
		p.i = j
	case isDigit(n) || strings.IndexByte("@*#?$!-", n) >= 0 && n != 0:
		p.hazard("parameter expansion $" + string(n))
		p.word.WriteString(p.s[p.i : p.i+2])
		p.inWord = true
		p.i += 2
	default: // a lone $ is literal
		p.word.WriteByte('$')
		p.inWord = true
		p.i++
	}
	return nil
}

// matchParen returns the index of the ')' closing the '(' at open, skipping
// quoted text.
func matchParen(s string, open int) (int, error) {
	depth := 0
	for j := open; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '\'':
			k := strings.IndexByte(s[j+1:], '\'')
			if k < 0 {
				return 0, errNoClosingQuote
			}
			j += k + 1
		case '"':
			k := j + 1
			for ; k < len(s) && s[k] != '"'; k++ {
				if s[k] == '\\' {
					k++
				}
			}
			if k >= len(s) {
				return 0, errNoClosingQuote
			}
			j = k
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return j, nil
			}
		}
	}
	return 0, errors.New("missing )")
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
