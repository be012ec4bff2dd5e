package extension

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestModuleImportsOnlyTheStandardLibrary: the module is stdlib-only, so
// go.mod has no require line and every import is a standard package or one
// of the module's own.
func TestModuleImportsOnlyTheStandardLibrary(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mod), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "require") {
			t.Fatalf("go.mod has a require line: %q", line)
		}
	}
	out, err := exec.Command("go", "list", "-deps", "-test", "-f", `{{if not .Standard}}{{.ImportPath}}{{"\n"}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		// Test variants read "pkg [pkg.test]" and "pkg.test".
		p := strings.TrimSuffix(strings.Fields(line)[0], ".test")
		p = strings.TrimSuffix(p, "_test") // external test packages
		if p != "github.com/reasonix-ext/extension" && !strings.HasPrefix(p, "github.com/reasonix-ext/extension/") {
			t.Errorf("non-standard dependency %s", p)
		}
	}
}

// TestEveryExportedIdentifierIsDocumented walks every non-test Go file of
// the module and reports each exported declaration without a doc comment.
func TestEveryExportedIdentifierIsDocumented(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Doc == nil && f.Name.Name != "main" && !hasPackageDoc(filepath.Dir(path), fset) {
			t.Errorf("%s: package %s has no package doc", path, f.Name.Name)
		}
		for _, decl := range f.Decls {
			checkDecl(t, fset, decl)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// hasPackageDoc reports whether some file of dir carries the package doc.
func hasPackageDoc(dir string, fset *token.FileSet) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, p := range files {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err == nil && f.Doc != nil {
			return true
		}
	}
	return false
}

func checkDecl(t *testing.T, fset *token.FileSet, decl ast.Decl) {
	t.Helper()
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() || d.Doc != nil {
			return
		}
		if d.Recv != nil && !exportedReceiver(d.Recv) {
			return
		}
		t.Errorf("%s: %s has no doc comment", fset.Position(d.Pos()), d.Name.Name)
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				if s.Name.IsExported() && d.Doc == nil && s.Doc == nil {
					t.Errorf("%s: type %s has no doc comment", fset.Position(s.Pos()), s.Name.Name)
				}
			case *ast.ValueSpec:
				for _, n := range s.Names {
					// A documented const/var block covers its members.
					if n.IsExported() && d.Doc == nil && s.Doc == nil && s.Comment == nil {
						t.Errorf("%s: %s has no doc comment", fset.Position(n.Pos()), n.Name)
					}
				}
			}
		}
	}
}

func exportedReceiver(recv *ast.FieldList) bool {
	typ := recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}
