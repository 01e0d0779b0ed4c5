# The init of a forked `namespaces` Guest, once it has forked the Guest (pysolate/_guest/_init_elf.py).
#
# A whole static ELF for x86_64 Linux, headers written out here, so the bytes depend on this
# text alone (no linker layout, no libc):
#
#     as --64 -o init.o _init_x86_64.S && objcopy -O binary -j .text init.o init.bin
#
# gives the bytes of `_init_elf.X86_64` (tests/pysolate/test_init_elf.py reassembles and compares).
#
# Run as `execveat(memfd, "", ["pysolate-init", "<guest pid>"], [], AT_EMPTY_PATH)` by pid 1 of
# the Guest's pid namespace with one fd, 0: the request's status socket (SOCK_SEQPACKET).
# It does what today's Python init does after the fork, and nothing else:
#
#     wait4(guest, &status, 0, NULL)            (again on EINTR, as os.waitpid does: PEP 475)
#     write(0, "exit <status, decimal>")        (one message; EPIPE ignored: SIGPIPE stays
#                                               ignored across exec, and nobody listens any more)
#     exit_group(0)
#
# If wait4 fails (no such child) it exits without a message, as os.waitpid raising did.

        .intel_syntax noprefix
        .set    BASE, 0x400000          # where the one PT_LOAD segment is mapped
        .text
ehdr:                                   # Elf64_Ehdr
        .byte   0x7f, 'E', 'L', 'F', 2, 1, 1, 0         # ELFCLASS64, little endian, EV_CURRENT, System V
        .quad   0                                       # (padding of e_ident)
        .short  2                                       # e_type: ET_EXEC
        .short  62                                      # e_machine: EM_X86_64
        .long   1                                       # e_version
        .quad   BASE + start - ehdr                     # e_entry
        .quad   phdrs - ehdr                            # e_phoff
        .quad   0                                       # e_shoff: no section headers
        .long   0                                       # e_flags
        .short  64, 56, 2                               # e_ehsize, e_phentsize, e_phnum
        .short  0, 0, 0                                 # e_shentsize, e_shnum, e_shstrndx
phdrs:                                  # Elf64_Phdr: the file, read + execute
        .long   1, 5                                    # PT_LOAD, PF_R | PF_X
        .quad   0, BASE, BASE                           # p_offset, p_vaddr, p_paddr
        .quad   end - ehdr, end - ehdr                  # p_filesz, p_memsz
        .quad   0x1000                                  # p_align
                                        # Elf64_Phdr: a stack that is not executable
        .long   0x6474e551, 6                           # PT_GNU_STACK, PF_R | PF_W
        .quad   0, 0, 0, 0, 0, 16

start:
        mov     rsi, [rsp + 16]         # argv[1] (argc at [rsp], argv[0] at [rsp + 8])
        xor     ebx, ebx                # the Guest's pid, parsed from decimal
digit:
        movzx   eax, byte ptr [rsi]
        sub     eax, '0'
        cmp     eax, 9
        ja      parsed                  # (unsigned: the NUL, or anything but a digit)
        imul    ebx, ebx, 10
        add     ebx, eax
        inc     rsi
        jmp     digit
parsed:
        sub     rsp, 32                 # [rsp]: the wait status; up to [rsp + 32]: the message
wait:
        mov     edi, ebx                # wait4(guest, rsp, 0, NULL)
        mov     rsi, rsp
        xor     edx, edx
        xor     r10d, r10d
        mov     eax, 61
        syscall
        cmp     rax, -4                 # -EINTR
        je      wait
        test    rax, rax
        js      quit                    # no such child: nothing to report
        mov     eax, [rsp]              # the raw wait status, in decimal, backwards from [rsp + 32]
        lea     rsi, [rsp + 32]
        mov     ecx, 10
format:
        xor     edx, edx
        div     ecx
        add     dl, '0'
        dec     rsi
        mov     [rsi], dl
        test    eax, eax
        jnz     format
        sub     rsi, 5
        mov     dword ptr [rsi], 0x74697865     # "exit"
        mov     byte ptr [rsi + 4], ' '
        lea     rdx, [rsp + 32]         # write(0, rsi, length)
        sub     rdx, rsi
        xor     edi, edi
        mov     eax, 1
        syscall
quit:
        xor     edi, edi                # exit_group(0)
        mov     eax, 231
        syscall
end:
