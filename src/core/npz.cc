#include "core/npz.h"

#include <array>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace maitre {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndOfCentralDirSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndOfCentralDirSize = 22;
constexpr size_t kZip64EndSize = 56;
constexpr size_t kZip64LocatorSize = 20;
constexpr uint32_t kU32Max = 0xFFFFFFFFu;
constexpr uint16_t kU16Max = 0xFFFFu;
constexpr uint16_t kMethodStored = 0;
constexpr uint16_t kMethodDeflate = 8;

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("not a valid .npz file: ", what));
}

// Little-endian field readers. Callers check bounds first; these only
// assemble bytes, so they are correct on any host byte order.
uint16_t Get16(absl::string_view b, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) |
                               (static_cast<uint8_t>(b[at + 1]) << 8));
}
uint32_t Get32(absl::string_view b, size_t at) {
  return static_cast<uint32_t>(Get16(b, at)) | (static_cast<uint32_t>(Get16(b, at + 2)) << 16);
}
uint64_t Get64(absl::string_view b, size_t at) {
  return static_cast<uint64_t>(Get32(b, at)) | (static_cast<uint64_t>(Get32(b, at + 4)) << 32);
}

// True when [offset, offset + length) lies inside a buffer of `size` bytes,
// without overflowing on hostile values.
bool InBounds(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

// CRC-32 (the zip polynomial), so a corrupted member is reported as such
// instead of being parsed as garbage numbers.
uint32_t Crc32(absl::string_view data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (char ch : data) crc = table[(crc ^ static_cast<uint8_t>(ch)) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

// ---------------------------------------------------------------------------
// .npy header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (10000, 1, 28, 28), }

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// A recursive-descent reader for exactly the literals numpy writes; anything
// else (structured dtypes, nested values) is refused.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<NpyHeader> Parse() {
    NpyHeader header;
    bool has_descr = false, has_order = false, has_shape = false;
    MAITRE_RETURN_IF_ERROR(Expect('{'));
    while (true) {
      SkipSpace();
      if (Peek() == '}') break;
      MAITRE_ASSIGN_OR_RETURN(std::string key, ParseString());
      MAITRE_RETURN_IF_ERROR(Expect(':'));
      SkipSpace();
      if (key == "descr") {
        if (Peek() == '[') {
          return absl::InvalidArgumentError("structured (record) arrays are not supported");
        }
        MAITRE_ASSIGN_OR_RETURN(header.descr, ParseString());
        has_descr = true;
      } else if (key == "fortran_order") {
        MAITRE_ASSIGN_OR_RETURN(header.fortran_order, ParseBool());
        has_order = true;
      } else if (key == "shape") {
        MAITRE_ASSIGN_OR_RETURN(header.shape, ParseShape());
        has_shape = true;
      } else {
        return Error(absl::StrCat("unexpected key '", key, "'"));
      }
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      SkipSpace();
      if (Peek() != '}') return Error("expected ',' or '}'");
    }
    ++pos_;
    if (!has_descr || !has_order || !has_shape) {
      return Error("it needs 'descr', 'fortran_order' and 'shape'");
    }
    return header;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("bad .npy header at character ", pos_, ": ", what));
  }
  absl::Status Expect(char c) {
    SkipSpace();
    if (Peek() != c) return Error(absl::StrCat("expected '", std::string(1, c), "'"));
    ++pos_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ParseString() {
    SkipSpace();
    char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    size_t end = text_.find(quote, pos_ + 1);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  absl::StatusOr<bool> ParseBool() {
    if (absl::StartsWith(text_.substr(pos_), "True")) {
      pos_ += 4;
      return true;
    }
    if (absl::StartsWith(text_.substr(pos_), "False")) {
      pos_ += 5;
      return false;
    }
    return Error("expected True or False");
  }
  absl::StatusOr<std::vector<int64_t>> ParseShape() {
    std::vector<int64_t> shape;
    MAITRE_RETURN_IF_ERROR(Expect('('));
    while (true) {
      SkipSpace();
      if (Peek() == ')') break;
      if (!absl::ascii_isdigit(static_cast<unsigned char>(Peek()))) {
        return Error("shape dimensions must be non-negative integers");
      }
      int64_t d = 0;
      while (absl::ascii_isdigit(static_cast<unsigned char>(Peek()))) {
        int digit = Peek() - '0';
        if (d > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          return Error("shape dimension too large");
        }
        d = d * 10 + digit;
        ++pos_;
      }
      if (Peek() == 'L') ++pos_;  // Python 2 long literals in old files.
      shape.push_back(d);
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
      } else if (Peek() != ')') {
        return Error("expected ',' or ')' in shape");
      }
    }
    ++pos_;
    return shape;
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

struct DtypeCode {
  char kind;
  int size;
  DataType type;
};
constexpr std::array<DtypeCode, 12> kDtypeCodes = {{
    {'f', 2, DataType::kFp16},
    {'f', 4, DataType::kFp32},
    {'f', 8, DataType::kFp64},
    {'i', 1, DataType::kInt8},
    {'i', 2, DataType::kInt16},
    {'i', 4, DataType::kInt32},
    {'i', 8, DataType::kInt64},
    {'u', 1, DataType::kUint8},
    {'u', 2, DataType::kUint16},
    {'u', 4, DataType::kUint32},
    {'u', 8, DataType::kUint64},
    {'b', 1, DataType::kBool},
}};

absl::StatusOr<DataType> ParseDescr(absl::string_view descr, absl::string_view name) {
  auto unsupported = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "array '", name, "' has dtype '", descr,
        "', which is not supported; use one of f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1"));
  };
  if (descr.size() < 3) return unsupported();
  char order = descr[0];
  char kind = descr[1];
  int size = 0;
  for (char c : descr.substr(2)) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) || size > 100) return unsupported();
    size = size * 10 + (c - '0');
  }
  if (order != '<' && order != '|' && order != '=' && order != '>') return unsupported();
  if (order == '>' && size > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("array '", name, "' is big-endian ('", descr,
                     "'); convert it with arr.astype(arr.dtype.newbyteorder('<'))"));
  }
  for (const DtypeCode& code : kDtypeCodes) {
    if (code.kind == kind && code.size == size) return code.type;
  }
  return unsupported();
}

std::string DescrFor(DataType type) {
  for (const DtypeCode& code : kDtypeCodes) {
    if (code.type == type) {
      return absl::StrCat(code.size == 1 ? "|" : "<", std::string(1, code.kind), code.size);
    }
  }
  return "|u1";
}

// ---------------------------------------------------------------------------
// Zip reading.

struct ZipEntry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed_size = 0;
  uint64_t uncompressed_size = 0;
  uint64_t local_offset = 0;
};

struct CentralDirectory {
  uint64_t entries = 0;
  uint64_t offset = 0;
  uint64_t size = 0;
};

absl::StatusOr<CentralDirectory> FindCentralDirectory(absl::string_view b) {
  if (b.size() < kEndOfCentralDirSize) {
    return Corrupt("the file is too short to be a zip archive");
  }
  // The end record sits at the very end unless an archive comment (at most
  // 64 KiB) follows it, so search backwards over that window.
  size_t lowest = b.size() > kEndOfCentralDirSize + kU16Max
                      ? b.size() - kEndOfCentralDirSize - kU16Max
                      : 0;
  size_t eocd = b.size() - kEndOfCentralDirSize;
  while (Get32(b, eocd) != kEndOfCentralDirSig) {
    if (eocd == lowest) {
      return Corrupt("no zip end-of-central-directory record (is it an .npz file?)");
    }
    --eocd;
  }
  CentralDirectory cd;
  cd.entries = Get16(b, eocd + 10);
  cd.size = Get32(b, eocd + 12);
  cd.offset = Get32(b, eocd + 16);
  bool zip64 = cd.entries == kU16Max || cd.size == kU32Max || cd.offset == kU32Max;
  if (zip64 && eocd >= kZip64LocatorSize &&
      Get32(b, eocd - kZip64LocatorSize) == kZip64LocatorSig) {
    uint64_t end64 = Get64(b, eocd - kZip64LocatorSize + 8);
    if (!InBounds(end64, kZip64EndSize, b.size()) || Get32(b, end64) != kZip64EndSig) {
      return Corrupt("the zip64 end record is missing or out of bounds");
    }
    cd.entries = Get64(b, end64 + 32);
    cd.size = Get64(b, end64 + 40);
    cd.offset = Get64(b, end64 + 48);
  }
  if (!InBounds(cd.offset, cd.size, b.size())) {
    return Corrupt("the central directory lies outside the file (truncated?)");
  }
  // Each entry takes at least 46 bytes, which bounds a hostile count.
  if (cd.entries > cd.size / kCentralHeaderSize) {
    return Corrupt("the central directory declares more entries than it can hold");
  }
  return cd;
}

// Applies a zip64 extended-information extra field: it carries, in this
// order, the 64-bit values of whichever 32-bit fields were saturated.
absl::Status ApplyZip64Extra(absl::string_view extra, bool usize_saturated,
                             bool csize_saturated, bool offset_saturated, ZipEntry* entry) {
  size_t at = 0;
  while (at + 4 <= extra.size()) {
    uint16_t id = Get16(extra, at);
    uint16_t len = Get16(extra, at + 2);
    if (!InBounds(at + 4, len, extra.size())) return Corrupt("an extra field overruns its entry");
    if (id == kZip64ExtraId) {
      absl::string_view field = extra.substr(at + 4, len);
      size_t f = 0;
      auto next = [&](uint64_t* out) -> absl::Status {
        if (f + 8 > field.size()) return Corrupt("the zip64 extra field is too short");
        *out = Get64(field, f);
        f += 8;
        return absl::OkStatus();
      };
      if (usize_saturated) MAITRE_RETURN_IF_ERROR(next(&entry->uncompressed_size));
      if (csize_saturated) MAITRE_RETURN_IF_ERROR(next(&entry->compressed_size));
      if (offset_saturated) MAITRE_RETURN_IF_ERROR(next(&entry->local_offset));
      return absl::OkStatus();
    }
    at += 4 + len;
  }
  if (usize_saturated || csize_saturated || offset_saturated) {
    return Corrupt("a member needs a zip64 extra field but has none");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ZipEntry>> ReadCentralDirectory(absl::string_view b) {
  MAITRE_ASSIGN_OR_RETURN(CentralDirectory cd, FindCentralDirectory(b));
  std::vector<ZipEntry> entries;
  entries.reserve(cd.entries);
  uint64_t at = cd.offset;
  const uint64_t end = cd.offset + cd.size;
  for (uint64_t i = 0; i < cd.entries; ++i) {
    if (!InBounds(at, kCentralHeaderSize, end) || Get32(b, at) != kCentralHeaderSig) {
      return Corrupt("a central directory entry is damaged");
    }
    ZipEntry e;
    e.flags = Get16(b, at + 8);
    e.method = Get16(b, at + 10);
    e.crc = Get32(b, at + 16);
    uint32_t csize = Get32(b, at + 20);
    uint32_t usize = Get32(b, at + 24);
    uint16_t name_len = Get16(b, at + 28);
    uint16_t extra_len = Get16(b, at + 30);
    uint16_t comment_len = Get16(b, at + 32);
    uint32_t offset = Get32(b, at + 42);
    uint64_t name_at = at + kCentralHeaderSize;
    uint64_t variable = uint64_t{name_len} + extra_len + comment_len;
    if (!InBounds(name_at, variable, end)) return Corrupt("a member name overruns the directory");
    e.name = std::string(b.substr(name_at, name_len));
    e.compressed_size = csize;
    e.uncompressed_size = usize;
    e.local_offset = offset;
    MAITRE_RETURN_IF_ERROR(ApplyZip64Extra(b.substr(name_at + name_len, extra_len),
                                           usize == kU32Max, csize == kU32Max,
                                           offset == kU32Max, &e));
    entries.push_back(std::move(e));
    at = name_at + variable;
  }
  return entries;
}

// The bytes of one stored member, located through its local header.
absl::StatusOr<absl::string_view> MemberData(absl::string_view b, const ZipEntry& e) {
  if (e.flags & 0x1) {
    return absl::InvalidArgumentError(
        absl::StrCat("member '", e.name, "' is encrypted; .npz files are never encrypted"));
  }
  if (e.method == kMethodDeflate) {
    return absl::InvalidArgumentError(
        absl::StrCat("member '", e.name,
                     "' is compressed (deflate); save with np.savez, not savez_compressed"));
  }
  if (e.method != kMethodStored) {
    return absl::InvalidArgumentError(absl::StrCat(
        "member '", e.name, "' uses zip compression method ", e.method,
        "; only uncompressed members are supported (save with np.savez)"));
  }
  if (e.compressed_size != e.uncompressed_size) {
    return Corrupt(absl::StrCat("member '", e.name, "' is stored but its sizes disagree"));
  }
  if (!InBounds(e.local_offset, kLocalHeaderSize, b.size()) ||
      Get32(b, e.local_offset) != kLocalHeaderSig) {
    return Corrupt(absl::StrCat("the local header of member '", e.name, "' is missing"));
  }
  uint64_t data_at = e.local_offset + kLocalHeaderSize + Get16(b, e.local_offset + 26) +
                     Get16(b, e.local_offset + 28);
  if (!InBounds(data_at, e.compressed_size, b.size())) {
    return Corrupt(absl::StrCat("member '", e.name, "' is truncated"));
  }
  absl::string_view data = b.substr(data_at, e.compressed_size);
  if (Crc32(data) != e.crc) {
    return Corrupt(absl::StrCat("member '", e.name, "' fails its CRC check (corrupted file)"));
  }
  return data;
}

// ---------------------------------------------------------------------------
// Zip writing.

void Put16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v & 0xFF));
  out->push_back(static_cast<char>(v >> 8));
}
void Put32(std::string* out, uint32_t v) {
  Put16(out, static_cast<uint16_t>(v & 0xFFFF));
  Put16(out, static_cast<uint16_t>(v >> 16));
}
void Put64(std::string* out, uint64_t v) {
  Put32(out, static_cast<uint32_t>(v & 0xFFFFFFFFu));
  Put32(out, static_cast<uint32_t>(v >> 32));
}

// 1980-01-01 00:00, the zip epoch: a fixed stamp keeps output reproducible.
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;

struct WrittenMember {
  std::string name;
  uint32_t crc = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
};

}  // namespace

absl::StatusOr<Tensor> ParseNpy(absl::string_view bytes, absl::string_view name) {
  static constexpr char kMagic[] = "\x93NUMPY";
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("array '", name, "': ", what));
  };
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return bad("not a .npy array (wrong magic bytes)");
  }
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  uint64_t header_at = 0, header_len = 0;
  if (major == 1) {
    header_len = Get16(bytes, 8);
    header_at = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return bad("truncated .npy header");
    header_len = Get32(bytes, 8);
    header_at = 12;
  } else {
    return bad(absl::StrCat(".npy format version ", major, " is not supported"));
  }
  if (!InBounds(header_at, header_len, bytes.size())) return bad("truncated .npy header");
  absl::StatusOr<NpyHeader> header =
      HeaderParser(bytes.substr(header_at, header_len)).Parse();
  if (!header.ok()) return bad(header.status().message());
  if (header->fortran_order) {
    return bad("is in Fortran order; save it with np.ascontiguousarray(arr)");
  }
  MAITRE_ASSIGN_OR_RETURN(DataType dtype, ParseDescr(header->descr, name));

  Tensor t;
  t.name = std::string(name);
  t.dtype = dtype;
  t.shape = std::move(header->shape);
  absl::string_view data = bytes.substr(header_at + header_len);
  // NumElements saturates, so a hostile shape cannot overflow this check.
  int64_t elements = t.NumElements();
  uint64_t elem_size = DataTypeSize(dtype);
  if (elements < 0 || static_cast<uint64_t>(elements) > data.size() / elem_size ||
      static_cast<uint64_t>(elements) * elem_size != data.size()) {
    return bad(absl::StrCat("shape ", ShapeToString(t.shape), " of ", DataTypeName(dtype),
                            " needs ", elements, " elements but the data holds ",
                            data.size() / elem_size, " (truncated or corrupt file)"));
  }
  t.data = std::string(data);
  return t;
}

absl::StatusOr<std::map<std::string, Tensor>> ParseNpz(absl::string_view bytes) {
  MAITRE_ASSIGN_OR_RETURN(std::vector<ZipEntry> entries, ReadCentralDirectory(bytes));
  std::map<std::string, Tensor> arrays;
  for (const ZipEntry& e : entries) {
    if (!absl::EndsWith(e.name, ".npy")) continue;
    std::string key = e.name.substr(0, e.name.size() - 4);
    if (arrays.count(key) > 0) {
      return Corrupt(absl::StrCat("array '", key, "' appears twice"));
    }
    MAITRE_ASSIGN_OR_RETURN(absl::string_view data, MemberData(bytes, e));
    MAITRE_ASSIGN_OR_RETURN(Tensor t, ParseNpy(data, key));
    arrays.emplace(std::move(key), std::move(t));
  }
  if (arrays.empty()) return Corrupt("the archive holds no .npy arrays");
  return arrays;
}

std::string WriteNpy(const Tensor& tensor) {
  bool valid = tensor.Validate().ok();
  std::string descr = valid ? DescrFor(tensor.dtype) : "|u1";
  std::string shape;
  if (!valid) {
    shape = absl::StrCat("(", tensor.data.size(), ",)");
  } else if (tensor.shape.size() == 1) {
    shape = absl::StrCat("(", tensor.shape[0], ",)");
  } else {
    shape = absl::StrCat("(", absl::StrJoin(tensor.shape, ", "), ")");
  }
  std::string dict =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // numpy pads the header with spaces and a newline so that the data starts
  // on a 64-byte boundary; version 2 only when the header outgrows 16 bits.
  size_t preamble = 10;
  size_t total = preamble + dict.size() + 1;
  size_t padded = (total + 63) / 64 * 64;
  bool v2 = padded - preamble > kU16Max;
  if (v2) {
    preamble = 12;
    total = preamble + dict.size() + 1;
    padded = (total + 63) / 64 * 64;
  }
  dict.append(padded - total, ' ');
  dict.push_back('\n');

  std::string out;
  out.reserve(padded + tensor.data.size());
  out.append("\x93NUMPY", 6);
  out.push_back(static_cast<char>(v2 ? 2 : 1));
  out.push_back(0);
  if (v2) {
    Put32(&out, static_cast<uint32_t>(dict.size()));
  } else {
    Put16(&out, static_cast<uint16_t>(dict.size()));
  }
  out.append(dict);
  out.append(tensor.data);
  return out;
}

std::string WriteNpz(const std::vector<Tensor>& arrays) { return WriteNpz(arrays, {}); }

std::string WriteNpz(const std::vector<Tensor>& arrays, const NpzWriteOptions& options) {
  std::string out;
  std::vector<WrittenMember> members;
  for (const Tensor& t : arrays) {
    WrittenMember m;
    m.name = t.name + ".npy";
    std::string npy = WriteNpy(t);
    m.crc = Crc32(npy);
    m.size = npy.size();
    m.offset = out.size();
    bool zip64 = options.force_zip64 || m.size >= kU32Max;
    Put32(&out, kLocalHeaderSig);
    Put16(&out, zip64 ? 45 : 20);  // version needed to extract
    Put16(&out, 0);                // flags
    Put16(&out, kMethodStored);
    Put16(&out, 0);  // time
    Put16(&out, kDosDate);
    Put32(&out, m.crc);
    Put32(&out, zip64 ? kU32Max : static_cast<uint32_t>(m.size));
    Put32(&out, zip64 ? kU32Max : static_cast<uint32_t>(m.size));
    Put16(&out, static_cast<uint16_t>(m.name.size()));
    Put16(&out, zip64 ? 20 : 0);
    out.append(m.name);
    if (zip64) {
      Put16(&out, kZip64ExtraId);
      Put16(&out, 16);
      Put64(&out, m.size);
      Put64(&out, m.size);
    }
    out.append(npy);
    members.push_back(std::move(m));
  }

  uint64_t cd_offset = out.size();
  for (const WrittenMember& m : members) {
    bool big_size = options.force_zip64 || m.size >= kU32Max;
    bool big_offset = options.force_zip64 || m.offset >= kU32Max;
    uint16_t extra_len = (big_size ? 16 : 0) + (big_offset ? 8 : 0);
    Put32(&out, kCentralHeaderSig);
    Put16(&out, 45);  // version made by
    Put16(&out, extra_len > 0 ? 45 : 20);
    Put16(&out, 0);
    Put16(&out, kMethodStored);
    Put16(&out, 0);
    Put16(&out, kDosDate);
    Put32(&out, m.crc);
    Put32(&out, big_size ? kU32Max : static_cast<uint32_t>(m.size));
    Put32(&out, big_size ? kU32Max : static_cast<uint32_t>(m.size));
    Put16(&out, static_cast<uint16_t>(m.name.size()));
    Put16(&out, extra_len > 0 ? extra_len + 4 : 0);
    Put16(&out, 0);  // comment
    Put16(&out, 0);  // disk
    Put16(&out, 0);  // internal attributes
    Put32(&out, 0);  // external attributes
    Put32(&out, big_offset ? kU32Max : static_cast<uint32_t>(m.offset));
    out.append(m.name);
    if (extra_len > 0) {
      Put16(&out, kZip64ExtraId);
      Put16(&out, extra_len);
      if (big_size) {
        Put64(&out, m.size);
        Put64(&out, m.size);
      }
      if (big_offset) Put64(&out, m.offset);
    }
  }
  uint64_t cd_size = out.size() - cd_offset;
  bool zip64_end = options.force_zip64 || members.size() >= kU16Max ||
                   cd_offset >= kU32Max || cd_size >= kU32Max;
  if (zip64_end) {
    uint64_t end64_offset = out.size();
    Put32(&out, kZip64EndSig);
    Put64(&out, kZip64EndSize - 12);  // size of the rest of this record
    Put16(&out, 45);
    Put16(&out, 45);
    Put32(&out, 0);
    Put32(&out, 0);
    Put64(&out, members.size());
    Put64(&out, members.size());
    Put64(&out, cd_size);
    Put64(&out, cd_offset);
    Put32(&out, kZip64LocatorSig);
    Put32(&out, 0);
    Put64(&out, end64_offset);
    Put32(&out, 1);
  }
  Put32(&out, kEndOfCentralDirSig);
  Put16(&out, 0);
  Put16(&out, 0);
  uint16_t count16 = zip64_end ? kU16Max : static_cast<uint16_t>(members.size());
  Put16(&out, count16);
  Put16(&out, count16);
  Put32(&out, zip64_end ? kU32Max : static_cast<uint32_t>(cd_size));
  Put32(&out, zip64_end ? kU32Max : static_cast<uint32_t>(cd_offset));
  Put16(&out, 0);
  return out;
}

}  // namespace maitre
