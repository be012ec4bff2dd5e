package extension

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// frozenSchemaSHA256 is the hash of the frozen v1 contract (D1), written
// here by hand so that no generated file can vouch for itself.
const frozenSchemaSHA256 = "22338e662c66a0cb0f6055263afc18e122640e71f552b601251a1c7899593be3"

func TestSchemaHashMatchesFrozenContractD1(t *testing.T) {
	sum := sha256.Sum256(CanonicalSchema())
	if got := hex.EncodeToString(sum[:]); got != frozenSchemaSHA256 || GeneratedSchemaHash != "sha256:"+got {
		t.Fatalf("sha256(CanonicalSchema()) = %s, GeneratedSchemaHash = %s, want both the frozen %s", got, GeneratedSchemaHash, frozenSchemaSHA256)
	}
}

// TestCommittedSchemaIsTheSharedContractD1 compares with the shared frozen
// contract when the checkout has it beside; the hash test above proves the
// same without it.
func TestCommittedSchemaIsTheSharedContractD1(t *testing.T) {
	committed, err := os.ReadFile("schema.generated.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(committed)
	if hex.EncodeToString(sum[:]) != frozenSchemaSHA256 {
		t.Fatalf("%s does not hash to the frozen contract", "schema.generated.json")
	}
	shared := filepath.FromSlash("../shared/conformance/reasonix.extension.v1.schema.json")
	frozen, err := os.ReadFile(shared)
	if os.IsNotExist(err) {
		t.Skipf("%s is not beside this checkout; TestSchemaHashMatchesFrozenContractD1 stands in for it", shared)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, frozen) {
		t.Fatalf("%s differs from %s", "schema.generated.json", shared)
	}
}

func TestSchemaStructure(t *testing.T) {
	var doc struct {
		Defs            map[string]map[string]any `json:"$defs"`
		InterceptEvents []string                  `json:"interceptEvents"`
		Limits          map[string]int            `json:"limits"`
		Errors          []map[string]any          `json:"errors"`
		Methods         map[string]struct {
			Class        string
			Direction    string
			Notification bool
			Params       map[string]string
			Result       map[string]string
		} `json:"methods"`
	}
	if err := json.Unmarshal(CanonicalSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Defs) != 41 || len(doc.Methods) != 16 || len(doc.InterceptEvents) != 17 || len(doc.Errors) != 14 {
		t.Fatalf("counts: %d defs, %d methods, %d events, %d errors; want 41, 16, 17, 14",
			len(doc.Defs), len(doc.Methods), len(doc.InterceptEvents), len(doc.Errors))
	}
	perDirection := map[string]int{}
	for name, m := range doc.Methods {
		perDirection[m.Direction]++
		if m.Notification != strings.HasSuffix(m.Direction, "_notification") {
			t.Errorf("%s: notification flag %v disagrees with direction %s", name, m.Notification, m.Direction)
		}
		if m.Notification != (m.Result == nil) {
			t.Errorf("%s: a notification has a null result and a request a $ref", name)
		}
		for _, ref := range []map[string]string{m.Params, m.Result} {
			if ref == nil {
				continue
			}
			if doc.Defs[strings.TrimPrefix(ref["$ref"], "#/$defs/")] == nil {
				t.Errorf("%s: unresolvable %s", name, ref["$ref"])
			}
		}
	}
	wantDir := map[string]int{"host_to_extension_request": 8, "extension_to_host_request": 3, "host_to_extension_notification": 3, "extension_to_host_notification": 2}
	for d, n := range wantDir {
		if perDirection[d] != n {
			t.Errorf("%d methods %s, want %d", perDirection[d], d, n)
		}
	}
	for name, def := range doc.Defs {
		if def["type"] != "object" || def["additionalProperties"] != false {
			t.Errorf("$defs/%s is not a closed object", name)
		}
	}
	wantLimits := map[string]int{"frameBytes": 8388608, "externalizeFieldBytes": 65536, "contentRefChunkBytes": 262144, "contentRefObjectBytes": 8388608}
	for k, v := range wantLimits {
		if doc.Limits[k] != v {
			t.Errorf("limit %s = %d, want %d", k, doc.Limits[k], v)
		}
	}
	if l := doc.Limits; !(l["externalizeFieldBytes"] < l["contentRefChunkBytes"] && l["contentRefChunkBytes"] < l["contentRefObjectBytes"] && l["contentRefObjectBytes"] <= l["frameBytes"]) ||
		l["frameBytes"] != FrameBytes || l["externalizeFieldBytes"] != ExternalizeFieldBytes || l["contentRefChunkBytes"] != ContentRefChunkBytes {
		t.Error("limits must satisfy field < chunk < object <= frame, and equal the constants")
	}
}

func TestRegistryMatchesDTOs(t *testing.T) {
	ms := Methods()
	for i := 1; i < len(ms); i++ {
		if ms[i-1].Name >= ms[i].Name {
			t.Errorf("registry not sorted: %s before %s", ms[i-1].Name, ms[i].Name)
		}
	}
	for _, m := range ms {
		if _, ok := lookupMethod(m.Name); !ok {
			t.Errorf("lookupMethod(%q) failed", m.Name)
		}
		if m.notification() != (m.result == nil) {
			t.Errorf("%s: result %v for notification=%v", m.Name, m.result, m.notification())
		}
	}
	if _, ok := lookupMethod("extension/bogus"); ok {
		t.Error("LookupMethod found a method that does not exist")
	}
}

func TestReasonTableD7(t *testing.T) {
	var doc struct {
		Errors []struct {
			JSONRPCCode int    `json:"jsonRpcCode"`
			Message     string `json:"message"`
			Reason      Reason `json:"reason"`
			Retryable   bool   `json:"retryable"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(CanonicalSchema(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, row := range doc.Errors {
		e := NewError(row.Reason, "")
		if e.Code != row.JSONRPCCode || e.Message != row.Message || e.Reason.Retryable() != row.Retryable || !row.Reason.Valid() {
			t.Errorf("%s: got code %d retryable %v message %q", row.Reason, e.Code, e.Reason.Retryable(), e.Message)
		}
	}
	if Reason("nope").Valid() {
		t.Error(`Reason("nope").Valid() = true`)
	}
}

// TestGeneratedFilesCarryTheHeader checks the convention that generated
// files say so where the format allows.
func TestGeneratedFilesCarryTheHeader(t *testing.T) {
	header := regexp.MustCompile(`Code generated by extension-protocol-gen\. DO NOT EDIT\.`)
	for _, p := range []string{"schema_hash_generated.go", "EXTENSION_PROTOCOL.v1.generated.md"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !header.Match(b) {
			t.Errorf("%s lacks the generated-code header", p)
		}
	}
}
