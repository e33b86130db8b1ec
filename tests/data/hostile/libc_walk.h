// A hostile kernel's helper: from &printf, walk down to libc's ELF header and look a
// symbol up in its dynamic symbol table (no forbidden name is ever written). Corpus only.
typedef unsigned long u64;
struct Ehdr { unsigned char id[16]; unsigned short type, machine; unsigned version;
              u64 entry, phoff, shoff; unsigned flags;
              unsigned short ehsize, phentsize, phnum, shentsize, shnum, shstrndx; };
struct Phdr { unsigned type, flags; u64 offset, vaddr, paddr, filesz, memsz, align; };
struct Dyn { long tag; u64 val; };
struct Sym { unsigned name; unsigned char info, other; unsigned short shndx; u64 value, size; };
__device__ void* libc_symbol(const char* want) {
  unsigned char* p = (unsigned char*)((u64)(void*)&printf & ~4095UL);
  while (!(p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F')) p -= 4096;
  Ehdr* e = (Ehdr*)p;
  Phdr* ph = (Phdr*)(p + e->phoff);
  Dyn* dyn = 0;
  for (int i = 0; i < e->phnum; i++) if (ph[i].type == 2) dyn = (Dyn*)(p + ph[i].vaddr);
  Sym* sym = 0;
  const char* str = 0;
  for (; dyn->tag; dyn++) {
    if (dyn->tag == 6) sym = (Sym*)dyn->val;
    if (dyn->tag == 5) str = (const char*)dyn->val;
  }
  for (Sym* s = sym; (const char*)s < str; s++) {
    const char* n = str + s->name;
    int k = 0;
    while (want[k] && n[k] == want[k]) k++;
    if (!want[k] && !n[k] && s->value) return p + s->value;
  }
  return 0;
}
