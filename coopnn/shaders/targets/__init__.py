"""What every shader target produces (`base.Binary`) and the scaffolding targets share (`base`, `scalar_math`); the
targets themselves live in their backends' folders (`coopnn.backends.<name>.target`)."""
