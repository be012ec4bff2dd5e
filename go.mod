module github.com/reasonix-ext/extension

go 1.25
