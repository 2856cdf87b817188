package sim

import (
	"fmt"
	"image/color"
	"sort"
	"strings"
)

// App is one installed app.
type App struct {
	ID     string // stable id, e.g. "settings"
	Label  string // shown under the icon, e.g. "Settings"
	Icon   string // AITW UI type of its icon, e.g. "ICON_SETTINGS"
	Search bool   // its main list has a search field
	color  color.RGBA
}

// Toggle is a switch in Settings (or an alarm in Clock).
type Toggle struct {
	ID    string // e.g. "wifi"
	Label string // e.g. "Wi-Fi"
}

// Item is one entry of a list app (a contact, a note, an email...).
type Item struct {
	Title string
	Sub   string
	Body  []string
}

// Content is everything the seed decides about a phone: which apps sit where,
// the Settings rows and their initial states, the lists' items.
// It is read-only once generated.
type Content struct {
	Seed      int64
	Clock     string         // status bar time, "10:42"
	Date      string         // home screen date, "Mon, Oct 10"
	Battery   int            // percent
	Wallpaper int            // index into wallpapers
	Apps      []App          // all apps, drawer (alphabetical) order
	Home      map[int]string // home grid cell (row*homeCols+col) -> app id
	Settings  []SettingRow   // Settings rows in screen order
	Initial   map[string]bool
	Alarms    []Toggle
	Items     map[string][]Item // list app id -> items in screen order
}

// SettingRow is one row of the Settings list: a switch or a page.
type SettingRow struct {
	ID     string
	Label  string
	Switch bool
}

const (
	homeCols = 4
	homeRows = 5
)

var allApps = []App{
	{ID: "settings", Label: "Settings", Icon: "ICON_SETTINGS", color: rgb(0x5f6368)},
	{ID: "contacts", Label: "Contacts", Icon: "ICON_PERSON", Search: true, color: rgb(0x1a73e8)},
	{ID: "notes", Label: "Notes", Icon: "ICON_EDIT", Search: true, color: rgb(0xf9ab00)},
	{ID: "browser", Label: "Browser", Icon: "ICON_COMPASS", color: rgb(0xe8453c)},
	{ID: "clock", Label: "Clock", Icon: "ICON_TIME", color: rgb(0x3949ab)},
	{ID: "calculator", Label: "Calculator", Icon: "ICON_PLUS", color: rgb(0x00897b)},
	{ID: "mail", Label: "Mail", Icon: "ICON_ENVELOPE", Search: true, color: rgb(0xd93025)},
	{ID: "messages", Label: "Messages", Icon: "ICON_CHAT", color: rgb(0x1e8e3e)},
	{ID: "phone", Label: "Phone", Icon: "ICON_CALL", color: rgb(0x188038)},
	{ID: "music", Label: "Music", Icon: "ICON_PLAY", Search: true, color: rgb(0xe52592)},
	{ID: "files", Label: "Files", Icon: "ICON_LIST", Search: true, color: rgb(0x4285f4)},
	{ID: "calendar", Label: "Calendar", Icon: "ICON_CALENDAR", color: rgb(0x7b1fa2)},
	{ID: "camera", Label: "Camera", Icon: "ICON_TAKE_PHOTO", color: rgb(0x455a64)},
	{ID: "gallery", Label: "Gallery", Icon: "ICON_GALLERY", color: rgb(0xf4511e)},
	{ID: "weather", Label: "Weather", Icon: "ICON_SUN", color: rgb(0x039be5)},
	{ID: "maps", Label: "Maps", Icon: "ICON_LOCATION", Search: true, color: rgb(0x34a853)},
}

// ListApps are the apps whose main screen is a list of Items with detail pages.
var ListApps = []string{"contacts", "notes", "mail", "messages", "phone", "music", "files", "calendar", "maps"}

// Toggles are the Settings switches.
var Toggles = []Toggle{
	{"wifi", "Wi-Fi"}, {"bluetooth", "Bluetooth"}, {"airplane", "Airplane mode"},
	{"dark_theme", "Dark theme"}, {"location", "Location"}, {"auto_rotate", "Auto-rotate screen"},
	{"dnd", "Do not disturb"}, {"battery_saver", "Battery saver"}, {"nfc", "NFC"},
	{"hotspot", "Mobile hotspot"}, {"mobile_data", "Mobile data"}, {"night_light", "Night light"},
}

// SettingPages are the Settings rows that open a page.
var SettingPages = []Toggle{
	{"network", "Network & internet"}, {"devices", "Connected devices"}, {"apps", "Apps"},
	{"notifications", "Notifications"}, {"battery", "Battery"}, {"storage", "Storage"},
	{"sound", "Sound & vibration"}, {"display", "Display"}, {"wallpaper", "Wallpaper & style"},
	{"accessibility", "Accessibility"}, {"security", "Security & privacy"}, {"accounts", "Accounts"},
	{"system", "System"}, {"about", "About phone"},
}

var (
	firstNames = []string{"Alice", "Bruno", "Carmen", "Daniel", "Elena", "Farid", "Grace", "Hugo", "Irene", "Jamal",
		"Keiko", "Liam", "Maria", "Nadia", "Oscar", "Priya", "Quinn", "Rosa", "Samuel", "Tara", "Umar", "Vera",
		"Wei", "Ximena", "Yusuf", "Zoe", "Aaron", "Bianca", "Carlos", "Dana", "Emil", "Fatima", "George", "Hana",
		"Ivan", "Julia", "Kofi", "Lena", "Marco", "Nina", "Omar", "Paula", "Rafael", "Sofia", "Tomas", "Ursula"}
	lastNames = []string{"Smith", "Garcia", "Chen", "Novak", "Okafor", "Rossi", "Silva", "Tanaka", "Muller", "Khan",
		"Dubois", "Larsen", "Ivanova", "Kowalski", "Moreau", "Haddad", "Nguyen", "Patel", "Schmidt", "Lopez",
		"Brown", "Wilson", "Jensen", "Costa", "Fischer", "Reyes", "Sato", "Young"}
	noteTopics = []string{"Groceries", "Meeting notes", "Packing list", "Book ideas", "Recipes", "Workout plan",
		"Gift ideas", "Travel plans", "Budget", "Garden", "Movies to watch", "Birthday party", "Car service",
		"Passwords hint", "Project Apollo", "Weekend chores", "Reading list", "Doctor visit", "Team lunch",
		"Podcast list", "Home repairs", "Language study", "Camping trip", "Wedding plans", "Quotes",
		"Shopping", "Piano practice", "Dinner menu", "Holiday cards", "Bike repair"}
	noteWords = []string{"milk", "eggs", "call", "tickets", "bread", "passport", "charger", "monday", "friday",
		"coffee", "apples", "paint", "cables", "plants", "invoice", "tent", "shoes", "flowers", "cake", "notebook"}
	mailSenders  = []string{"Bank", "Airline", "Library", "School", "Team", "Landlord", "Gym", "Store", "Clinic", "Newsletter"}
	mailSubjects = []string{"Your statement is ready", "Flight confirmation", "Books due soon", "Parent meeting",
		"Weekly sync", "Rent reminder", "Membership renewal", "Order shipped", "Appointment reminder",
		"This week in tech", "Invoice attached", "Password changed", "Welcome aboard", "Trip itinerary"}
	songs = []string{"Blue Horizon", "Midnight Train", "Paper Hearts", "Golden Hour", "Neon Lights", "River Song",
		"Silver Moon", "Summer Rain", "Echoes", "Wildfire", "Northern Sky", "Lost in Tokyo", "Ocean Drive",
		"City of Stars", "Slow Dance", "First Light", "Wanderer", "Starlight", "Afterglow", "Long Way Home"}
	artists   = []string{"The Lanterns", "Mira Vale", "Blue Pines", "Otto & June", "Kite Club", "Nova"}
	fileNames = []string{"report.pdf", "budget.xlsx", "photo_001.jpg", "notes.txt", "slides.pptx", "invoice.pdf",
		"resume.docx", "song.mp3", "map.png", "ticket.pdf", "recipe.txt", "contract.pdf", "video.mp4",
		"backup.zip", "poster.png", "letter.docx", "plan.txt", "scan_12.pdf", "receipt.jpg", "data.csv"}
	events = []string{"Dentist", "Team standup", "Yoga class", "Lunch with Sam", "Flight to Lisbon", "Book club",
		"Parent meeting", "Haircut", "Project review", "Birthday dinner", "Car wash", "Piano lesson", "Soccer",
		"Call with bank", "Movie night", "Gym"}
	places = []string{"Central Park", "City Library", "Harbor Cafe", "Main Station", "Old Town", "Museum of Art",
		"Riverside Mall", "Airport", "Sunset Beach", "Botanic Garden", "Stadium", "Market Square",
		"Hilltop Hotel", "Lakeside Trail", "Science Center", "Pizza Place"}
	weekdays = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
	months   = []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// NewContent generates the phone content for a seed.
func NewContent(seed int64) *Content {
	r := newRNG(seed, 1)
	c := &Content{Seed: seed, Home: map[int]string{}, Initial: map[string]bool{}, Items: map[string][]Item{}}
	c.Clock = fmt.Sprintf("%d:%02d", 6+r.intn(16), r.intn(60))
	c.Date = fmt.Sprintf("%s, %s %d", r.pick(weekdays), r.pick(months), 1+r.intn(28))
	c.Battery = 15 + r.intn(85)
	c.Wallpaper = r.intn(len(wallpapers))

	c.Apps = append([]App(nil), allApps...)
	sort.Slice(c.Apps, func(i, j int) bool { return c.Apps[i].Label < c.Apps[j].Label })

	// Home: a seed-chosen subset of apps in seed-chosen cells. Some apps are
	// only in the drawer, so "open X" sometimes needs the drawer.
	ids := make([]string, len(allApps))
	for i, a := range allApps {
		ids[i] = a.ID
	}
	r.shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	cells := make([]int, homeCols*homeRows)
	for i := range cells {
		cells[i] = i
	}
	r.shuffle(len(cells), func(i, j int) { cells[i], cells[j] = cells[j], cells[i] })
	n := 7 + r.intn(6)
	for i := 0; i < n; i++ {
		c.Home[cells[i]] = ids[i]
	}

	for _, t := range Toggles {
		c.Settings = append(c.Settings, SettingRow{ID: t.ID, Label: t.Label, Switch: true})
		c.Initial[t.ID] = r.chance(0.4)
	}
	c.Initial["airplane"] = r.chance(0.15)
	c.Initial["dark_theme"] = r.chance(0.2)
	for _, t := range SettingPages {
		c.Settings = append(c.Settings, SettingRow{ID: t.ID, Label: t.Label})
	}
	r.shuffle(len(c.Settings), func(i, j int) { c.Settings[i], c.Settings[j] = c.Settings[j], c.Settings[i] })

	na := 3 + r.intn(4)
	used := map[string]bool{}
	for len(c.Alarms) < na {
		h, m := 5+r.intn(17), 5*r.intn(12)
		label := fmt.Sprintf("%d:%02d %s", (h+11)%12+1, m, map[bool]string{true: "PM", false: "AM"}[h >= 12])
		if used[label] {
			continue
		}
		used[label] = true
		id := fmt.Sprintf("alarm_%02d%02d", h, m)
		c.Alarms = append(c.Alarms, Toggle{ID: id, Label: label})
		c.Initial[id] = r.chance(0.5)
	}
	sort.Slice(c.Alarms, func(i, j int) bool { return c.Alarms[i].ID < c.Alarms[j].ID })

	c.Items["contacts"] = genContacts(r)
	c.Items["notes"] = genNotes(r)
	c.Items["mail"] = genMail(r)
	c.Items["messages"] = genMessages(r)
	c.Items["phone"] = genCalls(r)
	c.Items["music"] = genSimple(r, songs, 12, func(t string) string { return r.pick(artists) })
	c.Items["files"] = genSimple(r, fileNames, 14, func(string) string { return fmt.Sprintf("%d KB", 10+r.intn(900)) })
	c.Items["calendar"] = genSimple(r, events, 10, func(string) string {
		return fmt.Sprintf("%s %d:%02d", r.pick(weekdays), 8+r.intn(11), 15*r.intn(4))
	})
	c.Items["maps"] = genSimple(r, places, 10, func(string) string { return fmt.Sprintf("%d.%d km", r.intn(20), r.intn(10)) })
	return c
}

func genContacts(r *rng) []Item {
	n := 22 + r.intn(12)
	seen := map[string]bool{}
	var items []Item
	for len(items) < n {
		name := r.pick(firstNames) + " " + r.pick(lastNames)
		first := strings.Fields(name)[0]
		if seen[name] || seen[first] { // unique first names keep searches unambiguous
			continue
		}
		seen[name], seen[first] = true, true
		phone := fmt.Sprintf("+1 555-%03d-%04d", r.intn(1000), r.intn(10000))
		email := strings.ToLower(strings.ReplaceAll(name, " ", ".")) + "@example.com"
		items = append(items, Item{Title: name, Sub: "Mobile " + phone, Body: []string{"Phone: " + phone, "Email: " + email}})
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Title < items[j].Title })
	return items
}

func genNotes(r *rng) []Item {
	topics := append([]string(nil), noteTopics...)
	r.shuffle(len(topics), func(i, j int) { topics[i], topics[j] = topics[j], topics[i] })
	n := 16 + r.intn(10)
	var items []Item
	for _, t := range topics[:n] {
		w := []string{r.pick(noteWords), r.pick(noteWords), r.pick(noteWords)}
		items = append(items, Item{Title: t, Sub: strings.Join(w, ", "), Body: []string{"- " + w[0], "- " + w[1], "- " + w[2]}})
	}
	return items
}

func genMail(r *rng) []Item {
	var items []Item
	for i := 0; i < 14; i++ {
		s, sub := r.pick(mailSenders), r.pick(mailSubjects)
		items = append(items, Item{Title: sub, Sub: "From " + s, Body: []string{"From: " + s, "Subject: " + sub, "See the details inside."}})
	}
	return items
}

func genMessages(r *rng) []Item {
	msgs := []string{"See you soon!", "Thanks a lot", "Running late", "Call me back", "Sounds good", "Where are you?", "Happy birthday!"}
	var items []Item
	seen := map[string]bool{}
	for len(items) < 12 {
		name := r.pick(firstNames)
		if seen[name] {
			continue
		}
		seen[name] = true
		m := r.pick(msgs)
		items = append(items, Item{Title: name, Sub: m, Body: []string{name + ": " + m, "Me: OK"}})
	}
	return items
}

func genCalls(r *rng) []Item {
	kinds := []string{"Incoming", "Outgoing", "Missed"}
	var items []Item
	for i := 0; i < 12; i++ {
		name := r.pick(firstNames) + " " + r.pick(lastNames)
		k := r.pick(kinds)
		items = append(items, Item{Title: name, Sub: fmt.Sprintf("%s, %d min ago", k, 1+r.intn(59)), Body: []string{k + " call"}})
	}
	return items
}

func genSimple(r *rng, pool []string, n int, sub func(string) string) []Item {
	p := append([]string(nil), pool...)
	r.shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	if n > len(p) {
		n = len(p)
	}
	var items []Item
	for _, t := range p[:n] {
		s := sub(t)
		items = append(items, Item{Title: t, Sub: s, Body: []string{s}})
	}
	return items
}

// App returns the app with the given id.
func (c *Content) App(id string) (App, bool) {
	for _, a := range c.Apps {
		if a.ID == id {
			return a, true
		}
	}
	return App{}, false
}

// OnHome reports whether the app has an icon on the home screen.
func (c *Content) OnHome(id string) bool {
	for _, a := range c.Home {
		if a == id {
			return true
		}
	}
	return false
}

// SettingLabel returns the label of a Settings row or alarm by id.
func (c *Content) SettingLabel(id string) string {
	for _, s := range c.Settings {
		if s.ID == id {
			return s.Label
		}
	}
	for _, a := range c.Alarms {
		if a.ID == id {
			return a.Label
		}
	}
	return id
}

func rgb(v uint32) color.RGBA { return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff} }
