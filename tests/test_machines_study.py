"""The study file: what it expresses, and every bad input refused in one line naming file and key."""

import re
import textwrap
from pathlib import Path

import pytest

from ccbench.machines.study import CVM_POOL_MAX, SLAB_BYTES, StudyError, cvm_swiotlb_slabs
from ccbench.machines.studyfile import load_study

BASE = """
name = "twins"
plan = "quick"
[machine]
vcpus = 2
memory = "2G"
"""


def top(extra):
    """The base study with these top-level keys (before its [machine] table)."""
    return BASE.replace("[machine]", extra + "[machine]")


def write(tmp_path, text, name="study.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def arms(*tables):
    return "".join(f"\n[[arm]]\n{t}\n" for t in tables)


def refused(tmp_path, text):
    with pytest.raises(StudyError) as info:
        load_study(write(tmp_path, text))
    message = str(info.value)
    assert "\n" not in message and str(tmp_path) in message
    return message


def test_a_study_of_a_plain_arm_its_bounce_twin_and_cvm_twins(tmp_path):
    study = load_study(
        write(
            tmp_path,
            top('order = "rounds"\nrounds = 4\n')
            + arms(
                'name = "plain"\nkind = "plain"',
                'name = "plain+bounce"\nkind = "plain"\ntwins = ["bounce"]',
                'name = "snp"\nkind = "sev-snp"\nbaseline = true\npolicy = "0x30000"',
                'name = "snp+poll"\nkind = "sev-snp"\ntwins = ["poll-idle"]',
                'name = "snp+eager"\nkind = "sev-snp"\ntwins = "eager-accept"\nkernel_params = ["transparent_hugepage=never"]',
            ),
        )
    )
    td = load_study(write(tmp_path, BASE + arms('name = "td"\nkind = "tdx"'), "td.toml")).arms[0]
    assert (study.name, study.plan, study.order, study.rounds, study.baseline) == ("twins", "quick", "rounds", 4, "snp")
    assert study.image.kind == "debian-12" and study.machine.memory_mib == 2048 and study.machine.cores == 2
    by = {a.name: a for a in study.arms}
    bounce = by["plain+bounce"].knobs
    # the pool a 2 GiB CVM gives itself: 6% of memory (123 MiB) in 2 KiB slabs, rounded up to a power
    # of two (the kernel's "SWIOTLB bounce buffer size roundup to 128MB")
    assert bounce.kernel_params == ("swiotlb=65536,force",)
    assert bounce.iommu_platform and bounce.disable_legacy
    assert not by["plain"].knobs.iommu_platform and by["plain"].knobs.kernel_params == ()
    assert by["snp+poll"].knobs.kernel_params == ("idle=poll",)
    assert by["snp+eager"].knobs.kernel_params == ("accept_memory=eager", "transparent_hugepage=never")
    assert dict(by["snp"].knobs.confidential)["policy"] == "0x30000"
    assert dict(td.knobs.confidential) == {"sept-ve-disable": "on"}
    assert by["snp"].knobs.iommu_platform  # a CVM's virtio devices use the DMA API
    with pytest.raises(AttributeError):
        study.rounds = 1  # frozen
    assert [names for _, names in study.schedule()] == [
        tuple(a.name for a in study.arms[r:] + study.arms[:r]) for r in range(4)
    ]


def test_a_study_with_sev_snp_and_tdx_arms_is_refused_in_one_line_unless_it_only_times_launches(tmp_path):
    """One host is AMD or Intel: a study that runs its plan in an SEV-SNP and a TDX arm cannot start."""
    mixed = arms(
        'name = "plain"\nkind = "plain"',
        'name = "snp"\nkind = "sev-snp"',
        'name = "snp+poll"\nkind = "sev-snp"\ntwins = ["poll-idle"]',
        'name = "td"\nkind = "tdx"',
    )
    message = refused(tmp_path, BASE + mixed)
    assert "arm.kind: sev-snp arms (snp, snp+poll) and tdx arms (td) cannot run on one host" in message
    assert "split them into two studies" in message
    # a launch-time study renders the arms this host cannot launch (docs/machines.md, section 12)
    launch = top('rounds = 0\n[sweep]\nmemory = ["512M", "1G"]\n') + mixed
    assert [a.kind for a in load_study(write(tmp_path, launch)).arms] == ["plain", "sev-snp", "sev-snp", "tdx"]


def test_the_bounce_pool_follows_the_cvm_arms_own_swiotlb_and_caps_at_1_gib(tmp_path):
    study = load_study(
        write(
            tmp_path,
            BASE
            + arms(
                'name = "snp"\nkind = "sev-snp"\nkernel_params = ["swiotlb=100000"]',
                'name = "b"\nkind = "plain"\ntwins = ["bounce"]',
            ),
        )
    )
    # what that kernel allocates for swiotlb=100000: whole segments, rounded up to a power of two
    assert study.arm("b").knobs.kernel_params == ("swiotlb=131072,force",)
    assert cvm_swiotlb_slabs(64 * 1024, 2) * SLAB_BYTES == CVM_POOL_MAX
    assert cvm_swiotlb_slabs(512, 2) * SLAB_BYTES == 64 * 2**20  # the 64 MiB floor
    assert cvm_swiotlb_slabs(8 * 1024, 4) == 262144  # 491 MiB -> 512 MiB
    assert cvm_swiotlb_slabs(512, 512) == 128 * 512  # at least one segment per area (per CPU)


def test_a_hand_made_bounce_twin_with_iommu_platform_is_taken_as_written(tmp_path):
    study = load_study(
        write(
            tmp_path,
            BASE + arms('name = "p"\nkind = "plain"\nkernel_params = ["swiotlb=65536,force"]\niommu_platform = true'),
        )
    )
    knobs = study.arm("p").knobs
    assert knobs.kernel_params == ("swiotlb=65536,force",) and knobs.iommu_platform and knobs.disable_legacy


def test_the_default_baseline_is_the_first_plain_arm_without_knobs(tmp_path):
    study = load_study(
        write(tmp_path, BASE + arms('name = "b"\nkind = "plain"\ntwins = ["bounce"]', 'name = "p"\nkind = "plain"'))
    )
    assert study.baseline == "p"


@pytest.mark.parametrize(
    ("arm", "words"),
    [
        ('name = "p"\nkind = "plain"\ntwins = ["poll-idle"]', ["poll-idle", "no twin", "arm 'p'.twins"]),
        ('name = "p"\nkind = "plain"\ntwins = ["eager-accept"]', ["eager-accept", "accepts no memory"]),
        ('name = "p"\nkind = "plain"\ntwins = ["haltpoll"]', ["haltpoll", "no twin"]),
        ('name = "s"\nkind = "sev-snp"\ntwins = ["bounce"]', ["bounces every DMA already"]),
        ('name = "s"\nkind = "tdx"\ntwins = ["hugepages"]', ["guest_memfd"]),
        ('name = "s"\nkind = "tdx"\ntwins = ["poll-idle", "haltpoll"]', ["choose one"]),
        ('name = "p"\nkind = "plain"\ntwins = ["turbo"]', ["'turbo' is not a twin preset", "bounce"]),
        ('name = "p"\nkind = "azure"', ["arm 'p'.kind", "plain, sev-snp, tdx"]),
        (
            'name = "p"\nkind = "plain"\nprovider = "azure"',
            ["a cloud study names its provider once, in a [cloud] table"],
        ),
        ('name = "p"\nkind = "plain"\npolicy = "0x30000"', ["policy", "only on the kind that has them"]),
        (
            'name = "b"\nkind = "plain"\ntwins = ["bounce"]\niommu_platform = false',
            ["iommu_platform", "cannot be false"],
        ),
        ('name = "s"\nkind = "sev-snp"\ndisable_legacy = false', ["disable_legacy", "sev-snp guest needs it"]),
        ('name = "b"\nkind = "plain"\ntwins = ["bounce"]\nkernel_params = ["swiotlb=1024,force"]', ["sets 'swiotlb="]),
        ('name = "p"\nkind = "plain"\nkernel_params = ["a b"]', ["kernel_params", "list of kernel parameters"]),
        (
            'name = "p"\nkind = "plain"\nkernel_params = ["swiotlb=65536,force"]',
            ["bounces nothing", "bypass the DMA API"],
        ),
        ('name = "bad name"\nkind = "plain"', ["arm[1].name"]),
        ('name = "p"\nkind = "plain"\nbaseline = "yes"', ["baseline", "true or false"]),
    ],
)
def test_arms_that_make_no_sense_are_refused_with_the_reason(tmp_path, arm, words):
    message = refused(tmp_path, BASE + arms(arm))
    for word in words:
        assert word in message, message


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (BASE.replace('plan = "quick"', 'plan = "no-such-plan"'), ["plan:", "'no-such-plan'", "ccbench plans"]),
        (BASE.replace('plan = "quick"\n', ""), ["plan:", "missing"]),
        (top('order = "random"\n'), ["order:", "interleaved, rounds"]),
        (top("rounds = 0\n"), ["rounds:", "at least 1"]),
        (top('provider = "aws"\n'), ["a cloud study names its provider once, in a [cloud] table"]),
        (top("colour = 1\n"), ["colour: unknown key in the top level"]),
        (top('image = "ubuntu-24.04"\n'), ["image:", "debian-12", "[image]"]),
        (BASE.replace('memory = "2G"', 'memory = "2 lots"'), ["machine.memory:", '"2G"']),
        (BASE.replace("vcpus = 2", "vcpus = 3\nsockets = 2"), ["machine.sockets/cores/threads", "machine.vcpus"]),
        (BASE + "pin = [0]\n", ["machine.pin", "1 host CPUs for 2 vCPUs"]),
        (BASE + "[machine.nic]\nvhost = true\n", ["machine.nic", "user-mode network"]),
        (BASE + '[machine.disk]\nbus = "ide"\n', ["machine.disk.bus", "virtio-blk, virtio-scsi"]),
        (BASE + '[machine.disk]\naio = "native"\ncache = "writeback"\n', ["machine.disk.aio", "O_DIRECT"]),
        (BASE.replace("[machine]", '[machine]\nmemory_backend = "ram"'), ["machine.memory_backend", "memfd"]),
        (BASE + "[[arm]]\n" + 'name = "a"\nkind = "plain"\n[[arm]]\nname = "a"\nkind = "plain"\n', ["used twice"]),
        (
            BASE + arms('name = "a"\nkind = "plain"\nbaseline = true', 'name = "b"\nkind = "plain"\nbaseline = true'),
            ["at most one"],
        ),
        (BASE, ["arm:", "no arms"]),
        ("name = [", ["TOML syntax error"]),
    ],
)
def test_bad_study_files_are_refused_in_one_line(tmp_path, text, words):
    if "memory_backend" in text:
        text += arms('name = "s"\nkind = "sev-snp"')
    elif "[[arm]]" not in text and "no arms" not in words[-1] and "TOML" not in words[0]:
        text += arms('name = "p"\nkind = "plain"')
    message = refused(tmp_path, text)
    for word in words:
        assert word in message, message


def test_a_user_image_with_its_kernel_or_booting_itself(tmp_path):
    for name in ("guest.qcow2", "vmlinuz", "initrd.img"):
        (tmp_path / name).write_bytes(b"x")
    kernel_image = '[image]\ndisk = "guest.qcow2"\nkernel = "vmlinuz"\ninitrd = "initrd.img"\nappend = "root=/dev/vda1 console=ttyS0"\n'
    study = load_study(write(tmp_path, BASE + kernel_image + arms('name = "b"\nkind = "plain"\ntwins = ["bounce"]')))
    assert study.image.kind == "kernel" and study.image.kernel == (tmp_path / "vmlinuz").resolve()
    assert study.image.append == "root=/dev/vda1 console=ttyS0"
    boots_itself = '[image]\ndisk = "guest.qcow2"\n'
    assert load_study(write(tmp_path, BASE + boots_itself + arms('name = "p"\nkind = "plain"'))).image.kind == "disk"
    message = refused(tmp_path, BASE + boots_itself + arms('name = "b"\nkind = "plain"\ntwins = ["bounce"]'))
    assert "boots itself" in message and "arm 'b'.kernel_params" in message
    message = refused(tmp_path, BASE + '[image]\ndisk = "missing.qcow2"\n' + arms('name = "p"\nkind = "plain"'))
    assert "image.disk" in message and "does not exist" in message
    message = refused(
        tmp_path, BASE + '[image]\ndisk = "guest.qcow2"\nkernel = "vmlinuz"\n' + arms('name = "p"\nkind = "plain"')
    )
    assert "image.append" in message and "root=" in message


def test_a_plan_file_next_to_the_study_and_a_broken_one(tmp_path):
    (tmp_path / "mine.toml").write_text('name = "mine"\n[[workloads]]\nkind = "prime"\nn = 1000\n')
    study = load_study(write(tmp_path, BASE.replace('"quick"', '"mine.toml"') + arms('name = "p"\nkind = "plain"')))
    assert study.plan == str((tmp_path / "mine.toml").resolve())
    (tmp_path / "broken.toml").write_text('[[workloads]]\nkind = "prime"\nsize = 3\n')
    message = refused(tmp_path, BASE.replace('"quick"', '"broken.toml"') + arms('name = "p"\nkind = "plain"'))
    assert "plan: the plan does not load" in message and "size" in message


def test_an_unreadable_study_is_one_line(tmp_path):
    with pytest.raises(StudyError, match="cannot read the study"):
        load_study(tmp_path / "absent.toml")
    with pytest.raises(StudyError, match="is a directory"):
        load_study(tmp_path)


def test_the_documented_study_loads_and_the_documented_errors_are_the_codes(tmp_path):
    doc = (Path(__file__).parents[1] / "docs" / "machines.md").read_text()
    example = re.search(r"```toml\n(name = \"bounce\".*?)```", doc, re.DOTALL).group(1)
    study = load_study(write(tmp_path, example))
    assert [a.name for a in study.arms] == ["plain", "plain+bounce", "snp", "snp+poll", "snp+eager"]
    assert study.baseline == "plain" and study.machine.pin == (2, 3)
    errors = re.search(r"```\n(study.toml: arm 'plain\+idle'.*?)```", doc, re.DOTALL).group(1).splitlines()
    (tmp_path / "nightly").unlink(missing_ok=True)
    cases = [
        BASE + arms('name = "plain+idle"\nkind = "plain"\ntwins = ["poll-idle"]'),
        BASE.replace("vcpus = 2", "vcpus = 4\nsockets = 2\ncores = 1") + arms('name = "p"\nkind = "plain"'),
        BASE.replace('"quick"', '"nightly"') + arms('name = "p"\nkind = "plain"'),
        BASE + arms('name = "azure-snp"\nkind = "sev-snp"\nprovider = "azure"'),
    ]
    for documented, text in zip(errors, cases, strict=True):
        message = refused(tmp_path, text).replace(str(tmp_path / "study.toml"), "study.toml")
        assert message == documented.replace("/home/me/nightly", str(tmp_path / "nightly"))


def test_two_study_runs_started_in_the_same_second_get_a_directory_each(tmp_path):
    """issue 59, item 8: the directory was machines-<study>-<UTC second>, made with exist_ok: two
    copies started in the same second with the same --out shared it (its SSH keys, its study.json)."""
    from datetime import UTC, datetime

    from ccbench.machines.lifecycle import study_directory

    now = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)
    first, second = study_directory(tmp_path, "bounce", now), study_directory(tmp_path, "bounce", now)
    assert first.name == "machines-bounce-20261202T100000Z" and second.name == "machines-bounce-20261202T100000Z-2"
    assert first.is_dir() and second.is_dir()


def test_directories_made_at_once_by_several_processes_are_all_distinct(tmp_path):
    """The mkdir is the test (no look first), so processes racing for one name each get their own."""
    import subprocess
    import sys
    import time

    start = time.time() + 1.0
    racer = (
        "import sys, time; from pathlib import Path; from ccbench.basics.fsutil import make_new_dir\n"
        f"time.sleep(max(0, {start} - time.time())); print(make_new_dir(Path(sys.argv[1]), 'machines-s-x'))"
    )
    processes = [
        subprocess.Popen([sys.executable, "-c", racer, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    made = [process.communicate(timeout=60)[0].strip() for process in processes]
    assert all(process.returncode == 0 for process in processes)
    assert len(set(made)) == 8 and len(list(tmp_path.iterdir())) == 8, made
