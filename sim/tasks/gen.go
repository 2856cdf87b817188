package tasks

import (
	"fmt"
	"strings"

	"github.com/autoui/autoui/sim"
)

// rnd is a splitmix64 generator private to task generation, so task
// parameters never change with the Go version.
type rnd struct{ s uint64 }

func mix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func newRand(seed int64, stream string) *rnd {
	h := uint64(1469598103934665603)
	for i := 0; i < len(stream); i++ {
		h = (h ^ uint64(stream[i])) * 1099511628211
	}
	return &rnd{s: mix(uint64(seed)) ^ h}
}

func (r *rnd) next() uint64   { r.s += 0x9e3779b97f4a7c15; return mix(r.s) }
func (r *rnd) intn(n int) int { return int(r.next() % uint64(n)) }
func (r *rnd) chance(p float64) bool {
	return float64(r.next()>>11)/(1<<53) < p
}
func (r *rnd) pick(xs []string) string { return xs[r.intn(len(xs))] }

// phrase fills one of the templates: {0}, {1}... are replaced by args.
func phrase(r *rnd, templates []string, args ...string) string {
	s := r.pick(templates)
	for i, a := range args {
		s = strings.ReplaceAll(s, fmt.Sprintf("{%d}", i), a)
	}
	return s
}

func appLabel(c *sim.Content, id string) string {
	a, _ := c.App(id)
	return a.Label
}

func allAppIDs(c *sim.Content) []string {
	var ids []string
	for _, a := range c.Apps {
		ids = append(ids, a.ID)
	}
	return ids
}

// startElsewhere sometimes starts the episode inside another app, so the
// expert (and the model) must get out first.
func startElsewhere(r *rnd, c *sim.Content, p float64, not ...string) []goal {
	if !r.chance(p) {
		return nil
	}
	ids := allAppIDs(c)
	for {
		id := r.pick(ids)
		skip := false
		for _, n := range not {
			skip = skip || n == id
		}
		if !skip {
			return []goal{appOpen{id}}
		}
	}
}

var openPhrases = []string{"Open the {0} app", "Open {0}", "Launch {0}", "Go to {0}", "Start the {0} app",
	"Show me the {0} app", "Can you open {0}", "Open the {0} app on my phone", "Please launch {0}", "I want to use {0}"}

func genOpenApp(t *Task, r *rnd, c *sim.Content) {
	ids := allAppIDs(c)
	app := r.pick(ids)
	t.Goal = phrase(r, openPhrases, appLabel(c, app))
	t.setup = startElsewhere(r, c, 0.3, app)
	if t.setup == nil && r.chance(0.15) {
		t.setup = []goal{drawerOpen{}}
	}
	t.goals = []goal{appOpen{app}}
	t.MaxSteps = 10
}

var (
	onPhrases  = []string{"Turn on {0}", "Enable {0}", "Switch {0} on", "Turn {0} on in Settings", "Please enable {0}", "Activate {0}", "Turn on {0} in the settings"}
	offPhrases = []string{"Turn off {0}", "Disable {0}", "Switch {0} off", "Turn {0} off in Settings", "Please disable {0}", "Deactivate {0}", "Turn off {0} in the settings"}
	alarmOn    = []string{"Turn on the {0} alarm", "Enable the alarm for {0}", "Switch on my {0} alarm", "Set the {0} alarm on in Clock"}
	alarmOff   = []string{"Turn off the {0} alarm", "Disable the alarm for {0}", "Switch off my {0} alarm", "Cancel the {0} alarm in Clock"}
)

// toggleGoal picks a switch (or an alarm) and the state opposite to its
// initial one; avoid lists ids already used by the task.
func toggleGoal(r *rnd, c *sim.Content, avoid map[string]bool) (settingIs, string) {
	if r.chance(0.15) {
		for {
			al := c.Alarms[r.intn(len(c.Alarms))]
			if avoid[al.ID] {
				continue
			}
			avoid[al.ID] = true
			on := !c.Initial[al.ID]
			ph := alarmOff
			if on {
				ph = alarmOn
			}
			return settingIs{al.ID, on}, phrase(r, ph, al.Label)
		}
	}
	for {
		tg := sim.Toggles[r.intn(len(sim.Toggles))]
		if avoid[tg.ID] {
			continue
		}
		avoid[tg.ID] = true
		on := !c.Initial[tg.ID]
		ph := offPhrases
		if on {
			ph = onPhrases
		}
		label := tg.Label
		if r.chance(0.5) && tg.ID != "nfc" {
			label = strings.ToLower(label)
		}
		return settingIs{tg.ID, on}, phrase(r, ph, label)
	}
}

func genToggle(t *Task, r *rnd, c *sim.Content) {
	g, text := toggleGoal(r, c, map[string]bool{})
	t.Goal = text
	t.setup = startElsewhere(r, c, 0.35)
	t.goals = []goal{g}
	t.MaxSteps = 12
}

var (
	searchPhrases  = []string{"Search for {0} in {1}", "Find {0} in {1}", "Look up {0} in {1}", "In {1}, search for {0}", "Search {1} for {0}", "Use {1} to find {0}"}
	browserPhrases = []string{"Search the web for {0}", "Look up {0} in the browser", "Search for {0} in Browser", "Use the browser to search for {0}", "Find {0} on the web", "Search for {0}", "What is {0}? Search it in the browser"}
	queryParts     = map[string][]string{
		"city":    {"paris", "tokyo", "lisbon", "cairo", "lima", "oslo", "denver", "seoul", "nairobi", "madrid", "toronto", "hanoi"},
		"food":    {"pancake", "lasagna", "curry", "sushi", "banana bread", "tacos", "ramen", "falafel", "paella", "pho"},
		"thing":   {"coffee shops", "gas stations", "pharmacies", "parks", "bookstores", "gyms", "bike repair", "pizza"},
		"product": {"iphone 15", "running shoes", "a laptop", "headphones", "a coffee maker", "a tent", "an e-bike"},
		"skill":   {"tie a tie", "bake bread", "change a tire", "learn python", "plant tomatoes", "meditate", "fold a shirt"},
		"topic":   {"black holes", "the roman empire", "climate change", "volcanoes", "the moon landing", "jazz history", "honey bees"},
	}
	queryTemplates = []string{"weather in {city}", "{food} recipe", "{thing} near me", "price of {product}", "how to {skill}",
		"facts about {topic}", "{city} travel guide", "best {food} in {city}", "news about {topic}", "flights to {city}"}
)

// browserQuery fills a template's parts in the order they appear (ranging
// over queryParts would draw them in Go's random map order, so one seed
// gave different goals from run to run).
func browserQuery(r *rnd) string {
	q := r.pick(queryTemplates)
	for {
		i := strings.IndexByte(q, '{')
		if i < 0 {
			return q
		}
		j := strings.IndexByte(q[i:], '}')
		part := q[i+1 : i+j]
		q = q[:i] + r.pick(queryParts[part]) + q[i+j+1:]
	}
}

// searchApps are the list apps with a search field.
var searchApps = []string{"contacts", "contacts", "notes", "notes", "mail", "music", "files", "maps"}

// listQuery picks an item of a searchable app and a query that finds it.
func listQuery(r *rnd, c *sim.Content, app string) (string, int) {
	items := c.Items[app]
	i := r.intn(len(items))
	q := items[i].Title
	switch app {
	case "contacts":
		if r.chance(0.6) {
			q = strings.Fields(q)[0]
		}
	case "files":
		q = strings.SplitN(q, ".", 2)[0]
	}
	if r.chance(0.3) {
		q = strings.ToLower(q)
	}
	return q, i
}

func genSearch(t *Task, r *rnd, c *sim.Content) {
	t.setup = startElsewhere(r, c, 0.3)
	t.MaxSteps = 14
	if r.chance(0.4) {
		q := browserQuery(r)
		t.Goal = phrase(r, browserPhrases, q)
		t.goals = []goal{browserSearch{q}}
		return
	}
	app := r.pick(searchApps)
	q, _ := listQuery(r, c, app)
	t.Goal = phrase(r, searchPhrases, q, appLabel(c, app))
	t.goals = []goal{listSearch{app, q}}
}

var itemPhrases = map[string][]string{
	"contacts": {"Open the contact {0}", "Show {0}'s contact details", "Find {0} in Contacts and open it", "Open {0} in my contacts"},
	"notes":    {"Open the note {0}", "Show my note titled {0}", "Open the {0} note in Notes", "Find the note {0} and open it"},
	"mail":     {"Open the email {0}", "Show the mail with subject {0}", "Read the email {0} in Mail"},
	"messages": {"Open my conversation with {0}", "Show the messages from {0}", "Open the chat with {0} in Messages"},
	"phone":    {"Open the call from {0} in Phone", "Show the call log entry for {0}"},
	"music":    {"Open the song {0} in Music", "Show the track {0}", "Find the song {0} in Music"},
	"files":    {"Open the file {0}", "Show {0} in Files", "Find the file {0} and open it"},
	"calendar": {"Open the event {0} in Calendar", "Show my calendar event {0}"},
	"maps":     {"Open the place {0} in Maps", "Show {0} in my saved places"},
	"settings": {"Open the {0} settings", "Go to {0} in Settings", "Show the {0} page in Settings", "Open Settings and go to {0}"},
}

// visibleRows is how many list rows fit on the first screen (800 dp phone).
const visibleRows = 8

func genScrollOpen(t *Task, r *rnd, c *sim.Content) {
	t.MaxSteps = 14
	if r.chance(0.25) {
		pg := sim.SettingPages[r.intn(len(sim.SettingPages))]
		t.Goal = phrase(r, itemPhrases["settings"], pg.Label)
		t.setup = startElsewhere(r, c, 0.3)
		t.goals = []goal{openSettingPage{pg.ID}}
		return
	}
	app := r.pick(sim.ListApps)
	items := c.Items[app]
	lo := visibleRows
	if lo >= len(items) {
		lo = 0
	}
	i := lo + r.intn(len(items)-lo)
	if r.chance(0.2) {
		i = r.intn(len(items)) // sometimes no scrolling is needed
	}
	if r.chance(0.3) {
		t.setup = []goal{appOpen{app}}
	} else {
		t.setup = startElsewhere(r, c, 0.25, app)
	}
	t.Goal = phrase(r, itemPhrases[app], items[i].Title)
	t.goals = []goal{openItem{app, i}}
}

var (
	homePhrases    = []string{"Go to the home screen", "Go home", "Return to the home screen", "Press home", "Take me to the home screen", "Close this app and go home"}
	backPhrases    = []string{"Go back", "Go back to the previous screen", "Press back", "Return to the previous page", "Navigate back"}
	drawerPhrases  = []string{"Open the app drawer", "Show all apps", "Open the list of all apps", "Show me all my apps"}
	recentPhrases  = []string{"Show recent apps", "Open the recent apps screen", "Show the overview of recent apps"}
	resultPhrases  = []string{"Search for {0} in the browser and open the first result", "Look up {0} on the web and open the top result", "Search the web for {0} and open the first link"}
	calcPhrases    = []string{"Calculate {0} in Calculator", "Use the calculator to compute {0}", "What is {0}? Use Calculator"}
	searchOpenList = []string{"Search for {0} in Contacts and open the contact", "Find {0} in Contacts and open their details", "Look up {0} in Contacts and open it"}
)

func genNavigate(t *Task, r *rnd, c *sim.Content) {
	t.MaxSteps = 6
	apps := allAppIDs(c)
	switch r.intn(4) {
	case 0:
		t.Goal = r.pick(homePhrases)
		t.setup = deepState(r, c, apps)
		t.goals = []goal{atHome{}}
	case 1:
		t.Goal = r.pick(backPhrases)
		setup, below := backState(r, c)
		t.setup, t.goals = setup, []goal{below}
	case 2:
		t.Goal = r.pick(drawerPhrases)
		t.setup = startElsewhere(r, c, 0.3)
		t.goals = []goal{drawerOpen{}}
	default:
		t.Goal = r.pick(recentPhrases)
		t.setup = startElsewhere(r, c, 0.7)
		t.goals = []goal{recentsOpen{}}
	}
}

// deepState opens an app, sometimes a detail page in it.
func deepState(r *rnd, c *sim.Content, apps []string) []goal {
	if r.chance(0.4) {
		app := r.pick(sim.ListApps)
		return []goal{openItem{app, r.intn(len(c.Items[app]))}}
	}
	return []goal{appOpen{r.pick(apps)}}
}

// backState returns a start state two pages deep and the page below it.
func backState(r *rnd, c *sim.Content) ([]goal, goal) {
	switch r.intn(4) {
	case 0:
		app := r.pick(sim.ListApps)
		return []goal{openItem{app, r.intn(minInt(len(c.Items[app]), visibleRows))}}, atPage{app: app, view: "main"}
	case 1:
		pg := sim.SettingPages[r.intn(len(sim.SettingPages))]
		return []goal{openSettingPage{pg.ID}}, atPage{app: "settings", view: "main"}
	case 2:
		return []goal{browserSearch{browserQuery(r)}}, atPage{app: "browser", view: "main"}
	}
	return []goal{appOpen{r.pick(allAppIDs(c))}}, atHome{}
}

func minInt(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func genMulti(t *Task, r *rnd, c *sim.Content) {
	t.setup = startElsewhere(r, c, 0.3)
	t.MaxSteps = 30
	avoid := map[string]bool{}
	switch r.intn(6) {
	case 0: // two switches
		g1, s1 := toggleGoal(r, c, avoid)
		g2, s2 := toggleGoal(r, c, avoid)
		t.Goal = s1 + " and " + lowerFirst(s2)
		t.goals = []goal{g1, g2}
	case 1: // a switch, then home
		g, s := toggleGoal(r, c, avoid)
		t.Goal = s + ", then " + lowerFirst(r.pick(homePhrases))
		t.goals = []goal{g, atHome{}}
	case 2: // a switch, then a web search
		g, s := toggleGoal(r, c, avoid)
		q := browserQuery(r)
		t.Goal = s + " and then " + lowerFirst(phrase(r, browserPhrases[:5], q))
		t.goals = []goal{g, browserSearch{q}}
	case 3: // search contacts, open the match
		items := c.Items["contacts"]
		i := r.intn(len(items))
		q := strings.Fields(items[i].Title)[0]
		t.Goal = phrase(r, searchOpenList, q)
		t.goals = []goal{listSearch{"contacts", q}, openItem{"contacts", i}}
	case 4: // search the web, open the first result
		q := browserQuery(r)
		t.Goal = phrase(r, resultPhrases, q)
		t.goals = []goal{browserSearch{q}, openResult{q, 0}}
	default: // calculator
		a, b := 2+r.intn(98), 2+r.intn(98)
		op := r.pick([]string{"+", "-", "*"})
		expr := fmt.Sprintf("%d%s%d", a, op, b)
		res := map[string]int{"+": a + b, "-": a - b, "*": a * b}[op]
		shown := strings.NewReplacer("*", " times ", "+", " plus ", "-", " minus ").Replace(expr)
		if r.chance(0.5) {
			shown = fmt.Sprintf("%d %s %d", a, op, b)
		}
		t.Goal = phrase(r, calcPhrases, shown)
		t.goals = []goal{calcResult{expr, fmt.Sprint(res)}}
	}
}

func lowerFirst(s string) string {
	if s == "" || strings.HasPrefix(s, "NFC") {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
