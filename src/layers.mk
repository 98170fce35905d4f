# The server's source layers, bottom up (doc/architecture.md), as folders
# of src/. Included by the top Makefile and by tests/fuzz/Makefile, so both
# build the same library from the same list. Set TUBED_SRC (the path of
# src/ from the including Makefile) first.
TUBED_PROTOS := $(patsubst $(TUBED_SRC)/%/,%,$(sort $(dir $(wildcard $(TUBED_SRC)/proto/*/*.c))))
# engine/store (binlog files, codec, replay, fsync thread, read-behind) is
# a sub-layer under the engine (doc/architecture.md).
TUBED_LAYERS := lib config engine/store engine net $(TUBED_PROTOS)
# Every layer's folder is on the include path: headers go by bare name.
TUBED_DIRS   := $(addprefix $(TUBED_SRC)/,$(TUBED_LAYERS))
TUBED_INC    := $(addprefix -I,$(TUBED_DIRS))
TUBED_LIB_SRC := $(foreach d,$(TUBED_DIRS),$(wildcard $(d)/*.c))
