# brokerd from source: release binaries that run without a Swift toolchain, and their installation.
#
#   make                                  build into $(DIST): stripped binaries, man pages, completions, units
#   sudo make install [PREFIX=/usr/local] install what `make` built (never builds as root when `make` ran first)
#   sudo make uninstall [PREFIX=...]      remove exactly those files again
#
# The .deb and the .rpm (scripts/package.sh) install the same files through `make install` from the same
# $(DIST), so this file is the one list of what brokerd installs. DESTDIR= stages an installation (packaging).
# Users' state (~/.local/state/brokerd) and configuration (~/.config/brokerd) are never touched.

PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
DOCDIR      ?= $(DATADIR)/doc/brokerd
# systemd's user manager reads /usr/lib/systemd/user and /usr/local/lib/systemd/user.
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
# The session bus looks for activatable services in $XDG_DATA_DIRS/dbus-1/services (/usr/local/share, /usr/share).
DBUSSERVICEDIR ?= $(DATADIR)/dbus-1/services
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
# site-functions is in zsh's default $fpath for /usr/local (and on Fedora for /usr); Debian's zsh reads
# /usr/share/zsh/vendor-completions instead, which the .deb passes.
ZSHCOMPDIR  ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d

# A recipe fails when any command of a pipeline fails (brokerctl | sed below).
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

SWIFT   ?= swift
STRIP   ?= strip
INSTALL ?= install
# A scratch path of its own: the release build never disturbs the debug build in .build.
SCRATCH ?= .build-release
DIST    ?= $(SCRATCH)/dist

# The Swift runtime is linked statically: Debian ships no Swift runtime package, so a dynamically linked
# binary would not start on a machine without /opt/swift. libc, libstdc++, libgcc_s and libsystemd stay dynamic.
# packaging/release.toolset.json holds the compile and link options of the release build (bench.sh uses the
# same file, so both share one build tree). Each one is there for the daemon's start-up cost and memory:
# - ld.lld with -z now: every symbol is bound at start, so the relocation table is read-only for the whole run
#   (full RELRO);
# - -z pack-relative-relocs (DT_RELR, glibc 2.36+): the 1.9 MiB of relative relocations, all read at every
#   start, shrink to 16 KiB;
# - --no-export-dynamic: the Swift runtime exports every symbol by default (33,000 of them, 2.5 MiB of symbol
#   tables) for dladdr-based symbolication; nothing loads into brokerd, so nothing needs them;
# - -function-sections with --symbol-ordering-file=packaging/release.order: the ~5,500 functions that start,
#   idle and a cache hit run are laid out together, so the kernel maps a few contiguous pages of code instead
#   of 64 KiB around each of hundreds of scattered ones. scripts/order-file.sh regenerates the list; a stale
#   list costs memory, never correctness.
# - -enforce-exclusivity=unchecked: no run-time exclusivity checks (swift_beginAccess) in the release build. They
#   were 14 % of the instructions of a cache hit (4,300 of 30,800, under callgrind). Debug builds, the test suite
#   and the fuzz targets keep them, so an overlapping access is still caught where the code is exercised.
SWIFT_BUILD = $(SWIFT) build -c release --static-swift-stdlib --scratch-path $(SCRATCH) --toolset packaging/release.toolset.json

.PHONY: all build install uninstall clean
all: build

# Always asks SwiftPM (it rebuilds only what changed), then refreshes $(DIST).
build:
	$(SWIFT_BUILD)
	$(MAKE) --no-print-directory dist-files BIN="$$($(SWIFT_BUILD) --show-bin-path)"

# Where the release binaries are (for scripts/order-file.sh).
.PHONY: print-bin-dir
print-bin-dir:
	@$(SWIFT_BUILD) --show-bin-path

# $(DIST) from the binaries in $(BIN). Everything `make install` needs is copied here, so that a
# packaging tree holding only this Makefile and $(DIST) installs without the sources or a toolchain.
.PHONY: dist-files
dist-files:
	test -x "$(BIN)/brokerd" && test -x "$(BIN)/brokerctl"
	rm -rf $(DIST).new
	mkdir -p $(DIST).new/bin $(DIST).new/man $(DIST).new/completions $(DIST).new/systemd $(DIST).new/doc
	$(INSTALL) -m 0755 "$(BIN)/brokerd" "$(BIN)/brokerctl" $(DIST).new/bin/
# Symbols only serve debuggers; stripped, the binaries are a fraction of the size. The same options as
# Debian's dh_strip, which then has nothing left to change: the .deb and the .rpm carry identical bytes.
	$(STRIP) --strip-all --remove-section=.comment --remove-section=.note $(DIST).new/bin/brokerd $(DIST).new/bin/brokerctl
	version=$$($(DIST).new/bin/brokerd --version) && \
	    sed "s/@VERSION@/$$version/g" packaging/man/brokerd.8 > $(DIST).new/man/brokerd.8
	sh packaging/man/generate-brokerctl-1.sh $(DIST).new/bin/brokerctl $(SCRATCH) > $(DIST).new/man/brokerctl.1
# Completion scripts are sourced, not run: the generated bash script's #! line is dropped.
	$(DIST).new/bin/brokerctl --generate-completion-script bash | sed '1{/^#!/d}' > $(DIST).new/completions/brokerctl
	$(DIST).new/bin/brokerctl --generate-completion-script zsh > $(DIST).new/completions/_brokerctl
	$(DIST).new/bin/brokerctl --generate-completion-script fish > $(DIST).new/completions/brokerctl.fish
	cp systemd/brokerd.socket systemd/brokerd.service systemd/com.microsoft.identity.broker1.service $(DIST).new/systemd/
	cp packaging/config.toml.example $(DIST).new/doc/config.toml.example
	cp packaging/debian/copyright $(DIST).new/doc/copyright
	cp Makefile $(DIST).new/Makefile
	rm -rf $(DIST) && mv $(DIST).new $(DIST)

# Built on demand only when nothing was built yet (order-only): `make && sudo make install` builds once, as
# the user, and install then only copies.
$(DIST)/bin/brokerd:
	$(MAKE) --no-print-directory build

install: | $(DIST)/bin/brokerd
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR) \
	    $(DESTDIR)$(USERUNITDIR) $(DESTDIR)$(DBUSSERVICEDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	$(INSTALL) -m 0755 $(DIST)/bin/brokerd $(DIST)/bin/brokerctl $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 0644 $(DIST)/man/brokerctl.1 $(DESTDIR)$(MANDIR)/man1/brokerctl.1
	$(INSTALL) -m 0644 $(DIST)/man/brokerd.8 $(DESTDIR)$(MANDIR)/man8/brokerd.8
	$(INSTALL) -m 0644 $(DIST)/completions/brokerctl $(DESTDIR)$(BASHCOMPDIR)/brokerctl
	$(INSTALL) -m 0644 $(DIST)/completions/_brokerctl $(DESTDIR)$(ZSHCOMPDIR)/_brokerctl
	$(INSTALL) -m 0644 $(DIST)/completions/brokerctl.fish $(DESTDIR)$(FISHCOMPDIR)/brokerctl.fish
	$(INSTALL) -m 0644 $(DIST)/doc/config.toml.example $(DIST)/doc/copyright $(DESTDIR)$(DOCDIR)/
# The units name the binary: point ExecStart= at this installation's brokerd.
	$(INSTALL) -m 0644 $(DIST)/systemd/brokerd.socket $(DESTDIR)$(USERUNITDIR)/brokerd.socket
	sed 's|^ExecStart=/usr/bin/brokerd|ExecStart=$(BINDIR)/brokerd|' $(DIST)/systemd/brokerd.service \
	    > $(DESTDIR)$(USERUNITDIR)/brokerd.service
	chmod 0644 $(DESTDIR)$(USERUNITDIR)/brokerd.service
	grep -qx 'ExecStart=$(BINDIR)/brokerd' $(DESTDIR)$(USERUNITDIR)/brokerd.service
	sed 's|^Exec=/usr/bin/brokerd|Exec=$(BINDIR)/brokerd|' $(DIST)/systemd/com.microsoft.identity.broker1.service \
	    > $(DESTDIR)$(DBUSSERVICEDIR)/com.microsoft.identity.broker1.service
	chmod 0644 $(DESTDIR)$(DBUSSERVICEDIR)/com.microsoft.identity.broker1.service
	grep -qx 'Exec=$(BINDIR)/brokerd' $(DESTDIR)$(DBUSSERVICEDIR)/com.microsoft.identity.broker1.service
	@echo "Installed. Each user: systemctl --user daemon-reload && systemctl --user enable --now brokerd.socket"

# Enabled sockets of users (~/.config/systemd/user/sockets.target.wants) and their state stay; systemctl
# --user disable brokerd.socket first.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/brokerd $(DESTDIR)$(BINDIR)/brokerctl \
	    $(DESTDIR)$(MANDIR)/man1/brokerctl.1 $(DESTDIR)$(MANDIR)/man8/brokerd.8 \
	    $(DESTDIR)$(BASHCOMPDIR)/brokerctl $(DESTDIR)$(ZSHCOMPDIR)/_brokerctl $(DESTDIR)$(FISHCOMPDIR)/brokerctl.fish \
	    $(DESTDIR)$(DOCDIR)/config.toml.example $(DESTDIR)$(DOCDIR)/copyright \
	    $(DESTDIR)$(USERUNITDIR)/brokerd.socket $(DESTDIR)$(USERUNITDIR)/brokerd.service \
	    $(DESTDIR)$(DBUSSERVICEDIR)/com.microsoft.identity.broker1.service
	-rmdir $(DESTDIR)$(DOCDIR) 2>/dev/null

clean:
	rm -rf $(SCRATCH)
