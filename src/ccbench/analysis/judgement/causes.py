"""What served a protection layer, in words: the cipher driver behind storage encryption and the
cipher behind a transport, read from the optional variant keys of each sample
(``storage_cipher_driver``, ``storage_cipher_accelerated``, ``transport_cipher``,
``transport_aes_accelerated``; see ccbench.analysis.samples.load.CAUSE_KEYS).

A cost measured with a software-only cipher (no AES instructions used) is real on that machine but
is not what encryption costs where the CPU's AES instructions serve it; the verdict says so. Which
driver is hardware and which software is ccbench.probe.crypto.implementation's to say (one
classification for the probe and the analysis); the sentences here are the verdict's wording.
"""

from __future__ import annotations

import pandas as pd


def cipher_name(driver: str) -> str:
    """ "xts(ecb(aes-fixed-time))" or "xts-aes-aesni" -> "AES-XTS"; unknown shapes are returned as given."""
    text = driver.lower()
    if "aes" in text:
        for mode in ("xts", "gcm", "cbc", "ctr", "cts"):
            if mode in text:
                return f"AES-{mode.upper()}"
        return "AES"
    if "adiantum" in text:
        return "Adiantum"
    if "chacha" in text:
        return "ChaCha20"
    return driver


def driver_accelerated(driver: str | None, recorded: bool | None) -> bool | None:
    """The recorded flag, or where it is missing a guess from the driver's name (None: cannot tell)."""
    if recorded is not None and not (isinstance(recorded, float) and recorded != recorded):
        return bool(recorded)
    if not driver:
        return None
    from ccbench.probe.crypto import implementation

    return implementation(driver)[0]


def storage_cause(driver: str | None, accelerated: bool | None) -> str | None:
    """A sentence on the storage cipher, or None when nothing was recorded."""
    if not driver:
        return None
    fast = driver_accelerated(driver, accelerated)
    name = cipher_name(driver)
    if fast is False:
        return (
            f"the kernel served {name} in software ({driver}): this cost is not intrinsic to encryption at rest; "
            "a kernel with an AES-NI/VAES driver would show less"
        )
    if fast is True:
        return f"the kernel served {name} with the CPU's AES instructions ({driver})"
    return f"cipher driver {driver}"


def transport_cause(cipher: str | None, accelerated: bool | None) -> str | None:
    if not cipher:
        return None
    if accelerated is False:
        return f"{cipher} ran without the CPU's AES instructions: this cost is not intrinsic to encryption in transit"
    if accelerated is True:
        return f"{cipher} with the CPU's AES instructions"
    return f"cipher {cipher}"


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and value != value)


def causes_of(samples: pd.DataFrame, configs, layer: str) -> list[str]:
    """The distinct cause sentences recorded in the samples of ``configs`` for a layer
    ("storage encryption: ...", "TLS", "secure channel", "in-memory storage: ...")."""
    if samples is None or samples.empty or "storage_cipher_driver" not in samples:
        return []
    rows = samples[samples["config"].isin(set(configs))]
    sentences: list[str] = []
    if layer.startswith("storage encryption"):
        keys = rows[["storage_cipher_driver", "storage_cipher_accelerated"]].drop_duplicates()
        for driver, accelerated in keys.itertuples(index=False):
            if _present(driver):
                sentences.append(storage_cause(driver, accelerated if _present(accelerated) else None))
    elif layer.startswith(("TLS", "secure channel", "transport")):
        keys = rows[["transport_cipher", "transport_aes_accelerated"]].drop_duplicates()
        for cipher, accelerated in keys.itertuples(index=False):
            if _present(cipher):
                sentences.append(transport_cause(cipher, accelerated if _present(accelerated) else None))
    return list(dict.fromkeys(s for s in sentences if s))
