package extension

// Policy tests that keep the code and its specification, PROTOCOL.md, in
// step: every ruling cited is defined there, every ruling defined is named
// by a test (or waits on the pending list), every section cited exists,
// nothing points at notes outside the module, and the spec's tables are
// the registry's.

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pendingRules are the rulings PROTOCOL.md defines that no test names yet,
// because what they rule is not built (PROTOCOL.md §11). The work that
// builds a ruling removes it from here.
var pendingRules = []string{}

var (
	ruleHeading    = regexp.MustCompile(`(?m)^#### (D\d+) `)
	sectionHeading = regexp.MustCompile(`(?m)^#{2,3} (\d+(?:\.\d+)?)\.? `)
	ruleCitation   = regexp.MustCompile(`\bD(\d{1,2})\b`)
	sectionCite    = regexp.MustCompile(`PROTOCOL\.md §(\d+(?:\.\d+)?)(?:-§(\d+(?:\.\d+)?))?`)
	testFunc       = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
	ruleInName     = regexp.MustCompile(`[a-z0-9]D(\d+)(?:[A-Z_]|$)`)
)

// moduleTexts returns the Go and Markdown files of the module by slash
// path: testdata is excluded, and so is this file, whose examples of bad
// citations are synthetic.
func moduleTexts(t *testing.T) map[string]string {
	t.Helper()
	texts := map[string]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); d.IsDir() || ext != ".go" && ext != ".md" || path == "spec_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		texts[filepath.ToSlash(path)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return texts
}

// ruleUse is what the module says about the rulings.
type ruleUse struct {
	defined map[string]bool     // #### Dn headings of PROTOCOL.md
	cited   map[string][]string // ruling -> file:line of each citation
	tested  map[string]bool     // rulings named by a test function
}

func collectRuleUse(texts map[string]string) ruleUse {
	u := ruleUse{defined: map[string]bool{}, cited: map[string][]string{}, tested: map[string]bool{}}
	for _, m := range ruleHeading.FindAllStringSubmatch(texts["PROTOCOL.md"], -1) {
		u.defined[m[1]] = true
	}
	for path, text := range texts {
		for i, line := range strings.Split(text, "\n") {
			for _, m := range ruleCitation.FindAllStringSubmatch(line, -1) {
				u.cited["D"+m[1]] = append(u.cited["D"+m[1]], fmt.Sprintf("%s:%d", path, i+1))
			}
		}
		if strings.HasSuffix(path, "_test.go") {
			for _, f := range testFunc.FindAllStringSubmatch(text, -1) {
				for _, m := range ruleInName.FindAllStringSubmatch(f[1], -1) {
					u.tested["D"+m[1]] = true
				}
			}
		}
	}
	return u
}

// ruleProblems lists what is wrong with the use of the rulings, each line
// naming the ruling: cited but not defined, defined but named by no test
// and not pending, pending but not defined, pending but named by a test
// (the work that built it forgot the list).
func ruleProblems(u ruleUse, pending []string) []string {
	var out []string
	for _, r := range slices.Sorted(maps.Keys(u.cited)) {
		if !u.defined[r] {
			out = append(out, fmt.Sprintf("%s is cited at %s but PROTOCOL.md defines no such ruling", r, strings.Join(u.cited[r], ", ")))
		}
	}
	for _, r := range slices.Sorted(maps.Keys(u.defined)) {
		if !u.tested[r] && !slices.Contains(pending, r) {
			out = append(out, fmt.Sprintf("%s is defined in PROTOCOL.md but no test names it (name one TestSomethingD%s, or list it as pending)", r, r[1:]))
		}
	}
	for _, r := range pending {
		if !u.defined[r] {
			out = append(out, fmt.Sprintf("%s is pending but PROTOCOL.md defines no such ruling", r))
		}
		if u.tested[r] {
			out = append(out, fmt.Sprintf("%s is pending but a test names it: take it off the pending list once it is built", r))
		}
	}
	return out
}

func TestEveryRuleCitedIsDefinedAndEveryRuleIsTested(t *testing.T) {
	u := collectRuleUse(moduleTexts(t))
	if len(u.defined) != 31 {
		t.Errorf("PROTOCOL.md defines %d rulings, want D1-D31", len(u.defined))
	}
	for _, p := range ruleProblems(u, pendingRules) {
		t.Error(p)
	}
}

// TestRuleCoverageNamesTheRuleItMisses proves the check above: a citation
// of an undefined ruling and a ruling that lost its last test are each
// reported, naming the ruling.
func TestRuleCoverageNamesTheRuleItMisses(t *testing.T) {
	u := collectRuleUse(map[string]string{
		"PROTOCOL.md":  "#### D1 Schema\n#### D2 Framing\n#### D9 Manifest\n#### D10 Start\n",
		"wire.go":      "// D2: one line per frame; see also D30.\n",
		"wire_test.go": "func TestFramingD2(t *testing.T) {}\nfunc TestOtherD30Thing(t *testing.T) {}\nfunc TestStartD10(t *testing.T) {}\n",
	})
	got := strings.Join(ruleProblems(u, []string{"D9", "D10", "D31"}), "\n")
	for _, want := range []string{
		"D30 is cited at wire.go:1",
		"D1 is defined in PROTOCOL.md but no test names it",
		"D31 is pending but PROTOCOL.md defines no such ruling",
		"D10 is pending but a test names it",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nwant one saying %q", got, want)
		}
	}
	if strings.Contains(got, "D2 is") || strings.Contains(got, "D9 is") {
		t.Errorf("problems:\n%s\nwant none about D2 (tested) or D9 (pending)", got)
	}
}

func TestEverySectionCitedExists(t *testing.T) {
	texts := moduleTexts(t)
	sections := map[string]bool{}
	for _, m := range sectionHeading.FindAllStringSubmatch(texts["PROTOCOL.md"], -1) {
		sections[m[1]] = true
	}
	if !sections["3.4"] || !sections["11"] {
		t.Fatalf("PROTOCOL.md sections %v: the headings are not numbered as expected", sections)
	}
	for path, text := range texts {
		for i, line := range strings.Split(text, "\n") {
			for _, m := range sectionCite.FindAllStringSubmatch(line, -1) {
				for _, s := range m[1:] {
					if s != "" && !sections[s] {
						t.Errorf("%s:%d cites PROTOCOL.md §%s, which does not exist", path, i+1, s)
					}
				}
			}
		}
	}
}

// TestNothingCitesTheNotesOutsideTheModule: the module is its own spec; the
// one path outside it is the optional comparison with the frozen schema.
func TestNothingCitesTheNotesOutsideTheModule(t *testing.T) {
	for path, text := range moduleTexts(t) {
		for i, line := range strings.Split(text, "\n") {
			// Spelled in two parts, so that this line is not itself a hit
			// of git grep.
			for _, bad := range []string{"CONTRACT" + "-NOTES", "DECISIONS" + ".md", "../" + "shared", `"..", ` + `"shared"`} {
				if strings.Contains(line, bad) && !(path == "schema_test.go" && strings.Contains(line, "conformance")) {
					t.Errorf("%s:%d mentions %s: cite PROTOCOL.md instead", path, i+1, bad)
				}
			}
		}
	}
}

// specTable returns the rows of the Markdown table under header in
// PROTOCOL.md, each cell trimmed of spaces and backticks.
func specTable(t *testing.T, header string) [][]string {
	t.Helper()
	b, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+header+"\n")
	if !ok {
		t.Fatalf("PROTOCOL.md has no table %q", header)
	}
	var rows [][]string
	for _, line := range strings.Split(rest, "\n")[1:] { // past the | --- | line
		if !strings.HasPrefix(line, "|") {
			break
		}
		var row []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			row = append(row, strings.Trim(strings.TrimSpace(c), "`"))
		}
		rows = append(rows, row)
	}
	return rows
}

func TestProtocolTablesEqualTheRegistry(t *testing.T) {
	want := map[string]string{}
	for _, m := range registry {
		result := "—"
		if m.result != nil {
			result = m.result.Name()
		}
		want[m.Name] = strings.Join([]string{m.Direction, m.Class, m.params.Name(), result}, " ")
	}
	got := map[string]string{}
	for _, r := range specTable(t, "| Method | Direction | Class | Params | Result |") {
		got[r[0]] = strings.Join(r[1:], " ")
	}
	checkTable(t, "methods", got, want)

	want, got = map[string]string{}, map[string]string{}
	for point, p := range pointTable {
		slot, budget := "—", "30 s"
		if p.slot != "" {
			slot = p.slot
		}
		if p.fast {
			budget = "5 s"
		}
		want[string(point)] = slot + " " + budget
	}
	for _, r := range specTable(t, "| Point | Payload members | Slot | Timeout | Typical use |") {
		got[r[0]] = r[2] + " " + r[3]
	}
	checkTable(t, "points", got, want)

	want = map[string]string{
		"frameBytes": strconv.Itoa(FrameBytes), "externalizeFieldBytes": strconv.Itoa(ExternalizeFieldBytes),
		"contentRefChunkBytes": strconv.Itoa(ContentRefChunkBytes), "contentRefObjectBytes": strconv.Itoa(FrameBytes),
	}
	got = map[string]string{}
	for _, r := range specTable(t, "| Limit | Bytes | Meaning |") {
		got[r[0]] = r[1]
	}
	checkTable(t, "limits", got, want)

	want, got = map[string]string{}, map[string]string{}
	for _, r := range reasons {
		want[string(r.Reason)] = fmt.Sprintf("%d %t %s", r.Code, r.Retryable, r.Message)
	}
	for _, r := range specTable(t, "| Reason | Code | Retryable | Message |") {
		got[r[0]] = strings.Join(r[1:], " ")
	}
	checkTable(t, "reasons", got, want)
}

func checkTable(t *testing.T, name string, got, want map[string]string) {
	t.Helper()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("PROTOCOL.md %s table: %s is %q, the registry says %q", name, k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("PROTOCOL.md %s table has %s, which the registry does not", name, k)
		}
	}
}
