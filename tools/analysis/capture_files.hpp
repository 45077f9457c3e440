// Readers for the capture files written by cuda/capture (layouts in
// cuda/capture/README.md), shared by the analysis programs here.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace capture {

inline std::vector<unsigned char> read_all(const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        std::perror(path.c_str());
        std::exit(1);
    }
    std::vector<unsigned char> data;
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.insert(data.end(), buf, buf + n);
    std::fclose(f);
    return data;
}

struct Cursor {
    const std::vector<unsigned char>& data;
    size_t at = 0;
    uint32_t u32() {
        uint32_t v;
        std::memcpy(&v, &data[at], 4);
        at += 4;
        return v;
    }
    uint64_t u64() {
        uint64_t v;
        std::memcpy(&v, &data[at], 8);
        at += 8;
        return v;
    }
    std::string text(size_t width) {
        std::string s(reinterpret_cast<const char*>(&data[at]), strnlen(reinterpret_cast<const char*>(&data[at]), width));
        at += width;
        return s;
    }
    const unsigned char* take(size_t n) {
        const unsigned char* p = &data[at];
        at += n;
        return p;
    }
};

inline uint64_t fnv1a64(const void* p, size_t n) {
    const unsigned char* b = static_cast<const unsigned char*>(p);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

struct Table {
    std::string name;
    std::vector<uint32_t> values;
    bool checksum_ok;
};

// sfu_tables_*.bin: "BXTAB01\0", u32 count, u32 0, then per table: name[64],
// u32 n, u32 n_exceptions, u64 fnv1a64 of the raw u32 values, i32 min delta,
// i32 max delta, n/2 bytes of nibbles (even index in the low nibble; signed
// 4-bit delta from the previous value, 8 = take the next exception), then
// n_exceptions pairs (u32 index, u32 value).
inline std::vector<Table> read_tables(const std::string& path) {
    std::vector<unsigned char> data = read_all(path);
    Cursor c{data};
    if (std::memcmp(c.take(8), "BXTAB01", 8) != 0) std::exit(1);
    uint32_t count = c.u32();
    c.u32();
    std::vector<Table> tables;
    for (uint32_t t = 0; t < count; ++t) {
        Table table;
        table.name = c.text(64);
        uint32_t n = c.u32(), n_exceptions = c.u32();
        uint64_t checksum = c.u64();
        c.u32();
        c.u32();
        const unsigned char* nibbles = c.take(n / 2);
        const unsigned char* exceptions = c.take((size_t)n_exceptions * 8);
        table.values.resize(n);
        size_t next_exception = 0;
        uint32_t previous = 0;
        for (uint32_t i = 0; i < n; ++i) {
            int code = (nibbles[i / 2] >> ((i & 1) * 4)) & 0xF;
            uint32_t v;
            if (code == 8) {
                std::memcpy(&v, exceptions + next_exception * 8 + 4, 4);
                ++next_exception;
            } else {
                v = previous + (uint32_t)(code >= 8 ? code - 16 : code);
            }
            table.values[i] = previous = v;
        }
        table.checksum_ok = fnv1a64(table.values.data(), (size_t)n * 4) == checksum;
        tables.push_back(std::move(table));
    }
    return tables;
}

struct Array {
    std::string name;
    uint32_t element_bytes, is_input;
    const unsigned char* data;
    uint32_t at(size_t i) const {
        uint32_t v = 0;
        std::memcpy(&v, data + i * element_bytes, element_bytes);
        return v;
    }
};
struct Section {
    std::string name;
    uint32_t count;
    std::vector<Array> arrays;
    const Array& array(const std::string& n) const {
        for (const Array& a : arrays)
            if (a.name == n) return a;
        std::fprintf(stderr, "no array %s in section %s\n", n.c_str(), name.c_str());
        std::exit(1);
    }
};

// ops.bin: "BXOPS01\0", u32 sections, u32 0; per section: name[48], u32 count,
// u32 arrays, per array {name[40], u32 element bytes, u32 is_input}, then
// each array's count*element_bytes bytes in order.
struct Ops {
    std::vector<unsigned char> data;
    std::vector<Section> sections;
    const Section& section(const std::string& prefix) const {
        for (const Section& s : sections)
            if (s.name.rfind(prefix, 0) == 0) return s;
        std::exit(1);
    }
};
inline Ops read_ops(const std::string& path) {
    Ops ops;
    ops.data = read_all(path);
    Cursor c{ops.data};
    if (std::memcmp(c.take(8), "BXOPS01", 8) != 0) std::exit(1);
    uint32_t n = c.u32();
    c.u32();
    for (uint32_t s = 0; s < n; ++s) {
        Section section;
        section.name = c.text(48);
        section.count = c.u32();
        uint32_t arrays = c.u32();
        for (uint32_t a = 0; a < arrays; ++a) {
            Array array;
            array.name = c.text(40);
            array.element_bytes = c.u32();
            array.is_input = c.u32();
            section.arrays.push_back(array);
        }
        for (Array& array : section.arrays) array.data = c.take((size_t)section.count * array.element_bytes);
        ops.sections.push_back(section);
    }
    return ops;
}

// mma files: "BXMMA01\0", u32 variant, u32 M, u32 N (8), u32 K (16), u32 tiles,
// u32 accumulator bytes (4: f32, 2: f16); per tile: u32 class, u32 0,
// A[M][K] u16, B[K][N] u16, C[M][N], D[M][N] (accumulator bytes each), all row-major.
struct MmaTile {
    uint32_t cls;
    const unsigned char* a;
    const unsigned char* b;
    const unsigned char* c;
    const unsigned char* d;
};
struct MmaCapture {
    std::vector<unsigned char> data;
    uint32_t variant, m, n, k, tiles, acc_bytes;
    std::vector<MmaTile> tile;
    uint16_t a(size_t t, int i, int kk) const { return load16(tile[t].a + (i * k + kk) * 2); }
    uint16_t b(size_t t, int kk, int j) const { return load16(tile[t].b + (kk * n + j) * 2); }
    uint32_t c(size_t t, int i, int j) const { return load_acc(tile[t].c + (i * n + j) * acc_bytes); }
    uint32_t d(size_t t, int i, int j) const { return load_acc(tile[t].d + (i * n + j) * acc_bytes); }
    static uint16_t load16(const unsigned char* p) { return (uint16_t)(p[0] | (p[1] << 8)); }
    uint32_t load_acc(const unsigned char* p) const {
        uint32_t v = 0;
        std::memcpy(&v, p, acc_bytes);
        return v;
    }
};
inline MmaCapture read_mma(const std::string& path) {
    MmaCapture m;
    m.data = read_all(path);
    Cursor c{m.data};
    if (std::memcmp(c.take(8), "BXMMA01", 8) != 0) std::exit(1);
    m.variant = c.u32();
    m.m = c.u32();
    m.n = c.u32();
    m.k = c.u32();
    m.tiles = c.u32();
    m.acc_bytes = c.u32();
    for (uint32_t t = 0; t < m.tiles; ++t) {
        MmaTile tile;
        tile.cls = c.u32();
        c.u32();
        tile.a = c.take(m.m * m.k * 2);
        tile.b = c.take(m.k * m.n * 2);
        tile.c = c.take(m.m * m.n * m.acc_bytes);
        tile.d = c.take(m.m * m.n * m.acc_bytes);
        m.tile.push_back(tile);
    }
    return m;
}

}  // namespace capture
