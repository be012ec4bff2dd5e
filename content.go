package extension

// MethodContentRead pages an externalized content object (PROTOCOL.md §6).
const MethodContentRead = "host/content/read"

// ContentEncoding is the encoding label of a content page; v1 has one.
type ContentEncoding string

// EncodingUTF8 is the only v1 content encoding.
const EncodingUTF8 ContentEncoding = "utf8"

func (ContentEncoding) enumValues() []string { return enumStrings(EncodingUTF8) }

// ExternalizedField describes one payload field moved into the host's
// content store (D22): its JSON pointer, content ref, size and hash.
type ExternalizedField struct {
	JSONPointer string `json:"jsonPointer" proto:"nonempty"`
	ContentRef  string `json:"contentRef" proto:"nonempty"`
	TotalBytes  int64  `json:"totalBytes" proto:"min=0"`
	SHA256      string `json:"sha256" proto:"sha256"`
}

// ContentReadParams are the params of host/content/read.
type ContentReadParams struct {
	ContentRef string `json:"contentRef" proto:"nonempty"`
	Offset     int64  `json:"offset" proto:"min=0"`
}

// ContentReadResult is one page of a content object.
type ContentReadResult struct {
	ContentRef string          `json:"contentRef" proto:"nonempty"`
	Offset     int64           `json:"offset" proto:"min=0"`
	DataBase64 string          `json:"dataBase64"`
	NextOffset int64           `json:"nextOffset,omitempty" proto:"min=0"`
	TotalBytes int64           `json:"totalBytes" proto:"min=0"`
	SHA256     string          `json:"sha256" proto:"sha256"`
	Encoding   ContentEncoding `json:"encoding"`
}
